//===- BackwardKeyTileRows.cpp - The key-tile kernel over row intervals ---===//
//
// BackwardKeyTile.h: the key-tile kernel for specs without a column
// direction (column mode rows): the list of a key tile's query tiles and
// the masks of its partial tiles come from the row direction.
//
//===----------------------------------------------------------------------===//

#include "BackwardKeyTile.h"

using namespace mlir;
using namespace mlir::cmask;
namespace bwd_rows = ::cmask::abi::backward_rows;
namespace abi = ::cmask::abi;

void KeyTileRowsKernel::build(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  headArgs(body);
  // Row intervals: (..., cu_seqlens_q, cu_seqlens_k, row intervals,
  //  q_tile_base, tile_info of the row direction's 128 x rowTileK tiles;
  //  heads i32, kv_group i32, num_seqs i32, key_tiles i32 (the grid's key
  //  tiles per sequence: ceil(max_seqlen_k / 128)), info_stride i32 (the
  //  tile_info row: 16 nkt_words), dk/dv strides, total_q, scales).
  Value cuQ = global(arg(bwd_rows::CuSeqlensQ)),
        cuK = global(arg(bwd_rows::CuSeqlensK));
  gIv = global(arg(bwd_rows::Intervals));
  gRowBase = global(arg(bwd_rows::QTileBase));
  gRowInfo = global(arg(bwd_rows::TileInfo));
  numHeads = arg(bwd_rows::NumHeads);
  kvGroup = arg(bwd_rows::KvGroup);
  numSeqs = arg(bwd_rows::NumSeqs);
  keyTiles = arg(bwd_rows::KeyTiles);
  infoStride = arg(bwd_rows::InfoStride);
  dkToken = arg(bwd_rows::DKTokenStride);
  dkHead = arg(bwd_rows::DKHeadStride);
  dvToken = arg(bwd_rows::DVTokenStride);
  dvHead = arg(bwd_rows::DVHeadStride);
  totalQ = arg(bwd_rows::TotalQ);
  scaleLog2 = arg(bwd_rows::ScaleLog2);
  scale = arg(bwd_rows::Scale);
  buildWalk(cuK, cuQ, divu(numHeads, kvGroup));
}

void KeyTileRowsKernel::forEachCta(
    Value ctaHeads, function_ref<void(Value, Value, Value)> run) {
  // Row intervals: CTA (head, sequence, key tile), heads outermost; the
  // key tiles past the sequence's keys have nothing to do.
  Value perHead = mul(numSeqs, keyTiles);
  ifThen(cmp(arith::CmpIPredicate::ult, bid, mul(ctaHeads, perHead)), [&] {
    fixHead = divu(bid, perHead);
    Value rest = remu(bid, perHead);
    Value seq = divu(rest, keyTiles), local = remu(rest, keyTiles);
    Value keys =
        sub(loadI32(gCuFixed, add(seq, c32(1))), loadI32(gCuFixed, seq));
    ifThen(cmp(arith::CmpIPredicate::slt, mul(local, c32(kFixedRows)), keys),
           [&] { run(seq, local, Value()); });
  });
}

void KeyTileRowsKernel::setSteps(Value seq, Value local) {
  ctaSeq = seq;
  ctaTile = local;
  listAddr = trunc32(fromIndex(
      add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem),
          add(pad, cIdx(lay.listOff))),
      i64));
  maskAddr = add(listAddr, c32(lay.maskOff - lay.listOff));
}

void KeyTileRowsKernel::buildRowList() {
  // Lane l of the producer warpgroup's first warp takes the query tiles of
  // 128 rows Q = 32 r + l: the row direction's entries of (Q, the key
  // tile's 128 / rowTileK k tiles) make one entry for each of Q's halves of
  // 64 rows inside q_len: empty when every part is, full when every
  // in-bounds part is, else partial with the union of the parts' slot
  // ranges. Ballots keep the list in query order (so that dK and dV sum in
  // a fixed order).
  int64_t parts = 128 / v.rowTileK;
  Value capacity = c32(kRowListCapacity);
  Value countAddr = add(listAddr, c32(4 * kRowListCapacity));
  // The producer warpgroup's first warp.
  Value lane = sub(tid, c32(sm90::kConsumerThreads));
  ifThen(cmp(arith::CmpIPredicate::ult, lane, c32(32)), [&] {
    Value qLen = ringLen, kLen = fixLen, tileK = ctaTile;
    Value numQ = divu(add(qLen, c32(127)), c32(128));
    Value qBase = loadI32(gRowBase, ctaSeq);
    Value rounds = divu(add(numQ, c32(31)), c32(32));
    Value below = NVVM::LaneMaskLtOp::create(b, loc, i32);
    auto ballot = [&](Value pred) {
      return NVVM::VoteSyncOp::create(b, loc, i32, c32(-1), pred,
                                      NVVM::VoteSyncKind::ballot)
          .getResult();
    };
    auto popc = [&](Value x) {
      return LLVM::CtPopOp::create(b, loc, i32, x).getResult();
    };
    SmallVector<Value> count = loop(
        c64(0), zext64(rounds), {c32(0)},
        [&](Value r, SmallVector<Value> carried) {
          Value q = add(mul(trunc32(r), c32(32)), lane);
          Value valid = cmp(arith::CmpIPredicate::ult, q, numQ);
          Value nonEmpty = cBool(false), allFull = cBool(true);
          Value k0 = c32(abi::kMaxSlots), end = c32(0);
          for (int64_t w = 0; w < parts; ++w) {
            Value kt = add(mul(tileK, c32(parts)), c32(w));
            Value inK =
                cmp(arith::CmpIPredicate::slt, mul(kt, c32(v.rowTileK)), kLen);
            Value ok = arith::AndIOp::create(b, loc, valid, inK);
            Value at = select(
                ok,
                add(mul(zext64(add(qBase, q)), zext64(infoStride)), zext64(kt)),
                c64(0));
            Value word = select(ok, loadI32(gRowInfo, at), c32(0));
            Value ne = cmp(arith::CmpIPredicate::ne, word, c32(0));
            Value isFull = eq(entryField(word, abi::kEntryState),
                              c32(int(abi::TileState::Full)));
            Value wk0 = entryField(word, abi::kEntryFirstSlot);
            Value wEnd = add(wk0, entryField(word, abi::kEntrySlotCount));
            nonEmpty = arith::OrIOp::create(b, loc, nonEmpty, ne);
            allFull = arith::AndIOp::create(
                b, loc, allFull,
                arith::OrIOp::create(
                    b, loc, isFull,
                    arith::XOrIOp::create(b, loc, inK, cBool(true))));
            k0 = select(ne, mins(k0, wk0), k0);
            end = select(ne, maxs(end, wEnd), end);
          }
          Value bits =
              entryFields(select(allFull, c32(int(abi::TileState::Full)),
                                 c32(int(abi::TileState::Partial))),
                          k0, maxs(sub(end, k0), c32(0)));
          // Q's halves: the second only when it starts inside q_len.
          Value second = cmp(arith::CmpIPredicate::slt,
                             mul(add(mul(q, c32(2)), c32(1)), c32(64)), qLen);
          Value one = nonEmpty;
          Value two = arith::AndIOp::create(b, loc, nonEmpty, second);
          Value b1 = ballot(one), b2 = ballot(two);
          Value pos = add(carried[0], add(popc(bitAnd(b1, below)),
                                          popc(bitAnd(b2, below))));
          for (int64_t h = 0; h < 2; ++h) {
            Value at = add(pos, c32(h));
            Value write = arith::AndIOp::create(
                b, loc, h ? two : one,
                cmp(arith::CmpIPredicate::ult, at, capacity));
            ifThen(write, [&] {
              store(bitOr(add(mul(q, c32(2)), c32(h)), bits),
                    sharedAt(add(listAddr, mul(at, c32(4)))));
            });
          }
          return SmallVector<Value>{add(carried[0], add(popc(b1), popc(b2)))};
        });
    ifThen(cmp(arith::CmpIPredicate::eq, lane, c32(0)),
           [&] { store(count[0], sharedAt(countAddr)); });
  });
}

void KeyTileRowsKernel::rowListSteps() {
  // All threads: the list's stores before it.
  namedBarrier(c32(sm90::kBarrierRowList), AttentionVariant::kThreads);
  numEntries = load(i32, sharedAt(add(listAddr, c32(4 * kRowListCapacity))), 4);
  entryBase = c32(0);
  // Never reached through the runtime (it refuses longer query sequences):
  // a list that does not fit stops the kernel rather than drop tiles.
  ifThen(cmp(arith::CmpIPredicate::ugt, numEntries, c32(kRowListCapacity)),
         [&] { LLVM::Trap::create(b, loc); });
  steps = mul(numEntries, kvGroup);
}

Value KeyTileRowsKernel::maskWord(Value word) {
  TileEntry entry = stepEntry(word);
  return ifElse(
      entry.needMask, {i32},
      [&] {
        // The rows' visibility, then transposed through shared memory: the
        // 256 consumer threads make one 32-key word each, (query row c / 4
        // of the step's tile, keys 32 (c % 4) .. of the key tile), from the
        // row's slots [k0, k0 + nslots) (a full tile crossing q_len or
        // k_len: all keys of the rows inside q_len); after a barrier each
        // thread reads its 16 query columns' words and takes the bits of its
        // two keys. Keys past k_len are dropped by fixValid.
        Value k0 = entryField(entry.word, abi::kEntryFirstSlot);
        Value end =
            select(entry.isPartial,
                   add(k0, entryField(entry.word, abi::kEntrySlotCount)), k0);
        Value row = shr(tid, c32(2)), part = bitAnd(tid, c32(3));
        Value q = add(entry.tileStart, row);
        Value inside = cmp(arith::CmpIPredicate::slt, q, ringLen);
        Value ivRow = mul(sext64(add(ringStart, mins(q, sub(ringLen, c32(1))))),
                          c64(v.rowSlots));
        Value keyBase = add(sub(fixRow, fixStart), mul(part, c32(32)));
        Value init = select(entry.isPartial, c32(0), c32(-1));
        SmallVector<Value> bits = loop(
            sext64(k0), sext64(end), {init},
            [&](Value k, SmallVector<Value> acc) {
              Value pair = load(i64, gep(gIv, add(ivRow, k), i64), 8);
              Value lo = sub(trunc32(pair), keyBase);
              Value hi =
                  sub(trunc32(arith::ShRUIOp::create(b, loc, pair, c64(32))),
                      keyBase);
              Value from = maxs(lo, c32(0));
              Value width = maxs(sub(hi, from), c32(0));
              return SmallVector<Value>{
                  bitOr(acc[0],
                        ptx("bmsk.clamp.b32 $0, $1, $2;", i32, {from, width}))};
            });
        Value own = select(inside, bits[0], c32(0));
        store(own, sharedAt(add(maskAddr, mul(tid, c32(4)))));
        namedBarrier(c32(sm90::kBarrierRowWords), sm90::kConsumerThreads);
        // Element (j, e) of row half h: key wg 64 + r0 + 8 h (one word of
        // 32 keys for both halves), query 8 j + 2 q + e; its bit in the
        // packed word is maskWord's, 8 (j % 4) + e + 2 (2 h + j / 4).
        Value myKeys = add(mul(wg, c32(64)), r0);
        Value wordOff = mul(shr(myKeys, c32(5)), c32(4));
        Value shift = bitAnd(myKeys, c32(31));
        Value packed = c32(0);
        for (int64_t j = 0; j < 8; ++j)
          for (int64_t el = 0; el < 2; ++el) {
            Value column = add(lane2q, c32(8 * j + el));
            Value w = load(
                i32,
                sharedAt(add(maskAddr, add(mul(column, c32(16)), wordOff))), 4);
            Value mine = shr(w, shift); // key r0 at bit 0, r0 + 8 at bit 8
            int64_t at = 8 * (j % 4) + el + 2 * (j / 4);
            packed = bitOr(packed, shl(bitAnd(mine, c32(1)), c32(at)));
            packed = bitOr(packed,
                           shl(bitAnd(shr(mine, c32(8)), c32(1)), c32(at + 4)));
          }
        return SmallVector<Value>{packed};
      },
      [&] { return SmallVector<Value>{c32(0)}; })[0];
}
