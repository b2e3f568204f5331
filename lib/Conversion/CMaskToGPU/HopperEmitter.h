//===- HopperEmitter.h - Building blocks of the sm_90a kernels --*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: terse builders for the attention
// kernels (AttentionForward.cpp): integer and float arithmetic, global and
// shared memory through the LLVM dialect, mbarriers, named barriers, wgmma
// with hand-built shared-memory descriptors, fragment reductions and
// packing. Kernel builders derive from it.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_HOPPEREMITTER_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_HOPPEREMITTER_H

#include "Emitter.h"

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::cmask {

/// The sm_90a layout facts the attention kernels are built on, named once.
namespace sm90 {
/// Threads: the two consumer warpgroups first (threads 0-255), then the
/// producer warpgroup (index 2), whose first thread issues the copies.
constexpr int64_t kWarpgroupThreads = 128;
constexpr int64_t kWarpgroupShift = 7; ///< thread >> it: the warpgroup
static_assert(int64_t(1) << kWarpgroupShift == kWarpgroupThreads);
constexpr int64_t kConsumerThreads = 2 * kWarpgroupThreads;
constexpr int64_t kProducerWarpgroup = 2;
static_assert(3 * kWarpgroupThreads == AttentionVariant::kThreads);
/// Register budgets (setmaxnreg): the producer gives registers back down to
/// kProducerRegisters, each consumer thread then takes kConsumerRegisters.
constexpr int32_t kProducerRegisters = 24;
constexpr int32_t kConsumerRegisters = 240;
/// setmaxnreg moves registers within the CTA's launch allocation (ptxas caps
/// a 384-thread kernel at 168 per thread, 65536 / 384 rounded down to 8): a
/// consumer's increase waits until the producer has released what it takes,
/// so these must balance or the consumers wait forever (a producer budget of
/// 32 hung the kernels on the H200, 2026-12-02).
constexpr int32_t kLaunchRegisters =
    int32_t(65536 / AttentionVariant::kThreads) / 8 * 8;
static_assert((kLaunchRegisters - kProducerRegisters) * kWarpgroupThreads >=
                  (kConsumerRegisters - kLaunchRegisters) * kConsumerThreads,
              "the consumers' setmaxnreg.inc would wait for registers the "
              "producer does not release");

/// 128B-swizzled shared memory (TMA boxes and wgmma operands): rows of 128
/// bytes (64 two-byte elements) swizzled in atoms of 8 rows; boxes of 64
/// rows. Tiles start 1024-aligned (the atom).
constexpr int64_t kRowBytes = 128;
constexpr int64_t kRowElements = 64;
constexpr int64_t kAtomBytes = 8 * kRowBytes;
constexpr int64_t kBoxRows = 64;
static_assert(kRowElements == ::cmask::abi::tensor_map::kColumns &&
              kBoxRows == ::cmask::abi::tensor_map::kRingRows);
constexpr int64_t kBoxBytes = kBoxRows * kRowBytes;
/// One wgmma k-step of 16 elements: 32 bytes along a K-major row; 16 rows
/// of an MN-major operand.
constexpr int64_t kStepBytesK = 16 * 2;
constexpr int64_t kStepBytesMN = 16 * kRowBytes;
/// Dynamic shared memory the kernels add to their layout: the static
/// mbarriers, which `gpu.dynamic_shared_memory` aliases, fill the first KB,
/// and the aligned base is the first kAtomBytes boundary past it.
constexpr int64_t kSharedReserve = 2 * kAtomBytes;
/// The static mbarriers' own bytes, which count against the per-CTA limit
/// besides the dynamic size (ptxas -v: 145 bytes in the persistent forward
/// at D=128): room for 32 barriers.
constexpr int64_t kStaticBarrierBytes = 32 * 8;

/// Swizzling permutes the 16-byte chunks of a row (8 per row) by the row's
/// index in its atom.
constexpr int64_t kChunkBytes = 16;
/// The wgmma k-steps (16 elements) in a row of 64 elements.
constexpr int64_t kStepsPerRow = kRowElements / 16;
/// Byte offset of k-step `k` in a K-major operand (boxes of 64 elements
/// along K, `boxBytes` apart) and in an MN-major one (16 rows per step,
/// boxes of 64 rows `boxBytes` apart).
constexpr int64_t kMajorStep(int64_t k, int64_t boxBytes) {
  return (k / kStepsPerRow) * boxBytes + (k % kStepsPerRow) * kStepBytesK;
}
constexpr int64_t mnMajorStep(int64_t k, int64_t boxBytes) {
  return (k / kStepsPerRow) * boxBytes + (k % kStepsPerRow) * kStepBytesMN;
}

/// wgmma shared-memory descriptors: byte addresses and offsets in units of
/// 16 bytes, the address a 14-bit field.
constexpr int64_t kDescriptorShift = 4;
constexpr int64_t kDescriptorAddressMask = 0x3fff;
/// The constant part of a descriptor: 128B swizzle, leading and stride byte
/// offsets (the address bits are added).
constexpr int64_t descriptorBits(int64_t leading, int64_t stride) {
  return (int64_t(1) << 62) | ((stride >> kDescriptorShift) << 32) |
         ((leading >> kDescriptorShift) << 16);
}
/// Of a K-major operand (rows of 128 B, atoms of 8 rows) and of an MN-major
/// one (boxes of 64 rows, atoms of 8 rows).
constexpr int64_t kKMajorBits = descriptorBits(16, kAtomBytes);
constexpr int64_t kMNMajorBits = descriptorBits(kBoxBytes, kAtomBytes);

/// Named barriers (0 is the CTA-wide barrier). The backward's main kernel
/// syncs both consumer warpgroups on kBarrierConsumers (dS^T is shared).
/// The row-interval backward also uses kBarrierRowList (all threads: the
/// producer's list of query tiles is written) and kBarrierRowWords (the
/// consumers: the step's mask words are exchanged); their uses do not
/// overlap the others'. The key-tile kernel's consumers hand their dQ
/// staging to its dQ warp on kBarrierDqFull and take it back on
/// kBarrierDqEmpty.
constexpr int32_t kBarrierConsumers = 1;
constexpr int32_t kBarrierRowList = 2;
constexpr int32_t kBarrierRowWords = 3;
constexpr int32_t kBarrierDqFull = 4;
constexpr int32_t kBarrierDqEmpty = 5;
} // namespace sm90

/// The sm_90a parts of the attention kernels' builders, over Emitter, for
/// operands of `dtype`.
class HopperEmitter : public Emitter {
public:
  HopperEmitter(OpBuilder &b, Location loc, ElementType dtype)
      : Emitter(b, loc) {
    bool bf16 = dtype == ElementType::BF16;
    elt = bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
    wgmmaType = bf16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
    gptr = LLVM::LLVMPointerType::get(ctx, 1);
    sptr = LLVM::LLVMPointerType::get(ctx, 3);
    workgroup = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  }

protected:
  // --- memory ----------------------------------------------------------------
  Value global(Value p) {
    return LLVM::AddrSpaceCastOp::create(b, loc, gptr, p);
  }
  Value gep(Value base, Value i, Type element) {
    return LLVM::GEPOp::create(b, loc, base.getType(), element, base,
                               ValueRange{i});
  }
  Value gepBytes(Value base, int64_t bytes) {
    return LLVM::GEPOp::create(
        b, loc, base.getType(), b.getI8Type(), base,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(bytes)});
  }
  Value load(Type t, Value p, unsigned align = 0) {
    return LLVM::LoadOp::create(b, loc, t, p, align);
  }
  /// buffer[i] of an int32 buffer (global pointer), i of any integer type.
  Value loadI32(Value buffer, Value i) {
    if (i.getType() == i32)
      i = sext64(i);
    return load(i32, gep(buffer, i, i32), 4);
  }
  void store(Value x, Value p) { LLVM::StoreOp::create(b, loc, x, p); }
  /// PTX statements without results, kept where they are emitted
  /// (`constraints`: the operands', then clobbers such as ~{memory}).
  void statement(llvm::StringRef code, llvm::StringRef constraints,
                 ValueRange operands = {}) {
    LLVM::InlineAsmOp::create(b, loc, Type(), operands, code, constraints,
                              /*has_side_effects=*/true,
                              /*is_align_stack=*/false,
                              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(),
                              ArrayAttr());
  }
  /// A compiler barrier: LLVM moves no memory access across it (the
  /// mbarrier waits are inline PTX without memory effects).
  void compilerFence() { statement("", "~{memory}"); }
  /// `x` (i32, the same in every lane of a converged warp) as ptxas can
  /// prove it uniform: redux.sync writes a uniform register, so what derives
  /// from it runs on the uniform datapath (TMA coordinates, wgmma
  /// descriptors, barrier addresses) instead of being moved with R2UR.
  Value warpUniform(Value x) {
    return ptx("redux.sync.min.u32 $0, $1, 0xffffffff;", i32, ValueRange{x});
  }
  /// An i32 shared-memory address as a pointer.
  Value sharedAt(Value addr) {
    return LLVM::IntToPtrOp::create(b, loc, sptr, zext64(addr));
  }
  /// red.global.add.v4.f32: four fp32 adds to 16 aligned bytes at the global
  /// pointer `p`, one instruction (PTX 8.1, sm_90).
  void redAddV4(Value p, ArrayRef<Value> four) {
    SmallVector<Value> operands{p};
    operands.append(four.begin(), four.end());
    statement("red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f",
              operands);
  }
  /// cp.reduce.async.bulk .add.f32: `bytes` (a multiple of 16) of fp32 at
  /// the shared address `from` (i32, 16-byte aligned) added to the global
  /// pointer `to` (16-byte aligned) by the bulk-copy engine, committed as
  /// this thread's bulk group (PTX 8.0, sm_90). The shared memory must not
  /// change until bulkWaitRead.
  void bulkReduceAdd(Value to, Value from, int64_t bytes) {
    statement("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 "
              "[$0], [$1], " +
                  std::to_string(bytes) + ";\n\tcp.async.bulk.commit_group;",
              "l,r,~{memory}", ValueRange{to, from});
  }
  /// Programmatic dependent launch (PTX 7.8, sm_90): waits until the grid
  /// launched before this one in the stream has completed and its memory
  /// operations are visible to this grid; returns at once when the kernel
  /// was not launched as its dependent. Inline PTX with a memory clobber:
  /// LLVM's intrinsic is IntrNoMem, so loads could move above it.
  void gridDependencyWait() { statement("griddepcontrol.wait;", "~{memory}"); }
  /// Lets the grid launched after this one as its programmatic dependent
  /// start once every CTA of this grid has issued this or exited.
  void launchDependents() {
    statement("griddepcontrol.launch_dependents;", "~{memory}");
  }
  /// This thread's bulk groups have read their shared memory.
  void bulkWaitRead() {
    statement("cp.async.bulk.wait_group.read 0;", "~{memory}");
  }
  /// cp.async.bulk: `bytes` (a multiple of 16) at the shared address `from`
  /// (i32, 16-byte aligned) stored to the global pointer `to` by the
  /// bulk-copy engine, committed as this thread's bulk group.
  void bulkStore(Value to, Value from, int64_t bytes) {
    statement("cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], " +
                  std::to_string(bytes) + ";\n\tcp.async.bulk.commit_group;",
              "l,r,~{memory}", ValueRange{to, from});
  }
  /// This thread's bulk groups have completed (their global writes
  /// performed), then ordered before its later generic-proxy accesses.
  void bulkWaitComplete() {
    statement("cp.async.bulk.wait_group 0;\n\tfence.proxy.async.global;",
              "~{memory}");
  }
  /// An inline PTX statement with an i32 result that LLVM neither moves nor
  /// removes (atomics, acquire loads).
  Value asmValue(llvm::StringRef code, llvm::StringRef constraints,
                 ValueRange operands) {
    return LLVM::InlineAsmOp::create(
               b, loc, i32, operands, code, constraints,
               /*has_side_effects=*/true, /*is_align_stack=*/false,
               LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  }
  /// A view of `shape` elements of `element` at `byteOffset` (index) of the
  /// dynamic shared memory `smem`.
  Value sharedView(Value smem, Value byteOffset, ArrayRef<int64_t> shape,
                   Type element) {
    auto type =
        MemRefType::get(shape, element, MemRefLayoutAttrInterface(), workgroup);
    return memref::ViewOp::create(b, loc, type, smem, byteOffset, ValueRange{});
  }

  /// A TMA box (and its shared-memory view) of `rows` rows of 64 elements.
  static SmallVector<int64_t, 3> boxShape(int64_t rows) {
    return {rows, 1, sm90::kRowElements};
  }
  /// The kernel argument `p` (a CUtensorMap passed by value) as a tensor-map
  /// descriptor with boxes of `box` elements of `element`, 128B-swizzled or
  /// not, zero fill out of bounds.
  Value tensorMapArg(Value p, ArrayRef<int64_t> box, Type element,
                     bool swizzle) {
    auto tensor = MemRefType::get(box, element, MemRefLayoutAttrInterface(),
                                  b.getI64IntegerAttr(3));
    auto type = nvgpu::TensorMapDescriptorType::get(
        ctx, tensor,
        swizzle ? nvgpu::TensorMapSwizzleKind::SWIZZLE_128B
                : nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE,
        nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    return UnrealizedConversionCastOp::create(b, loc, type, p).getResult(0);
  }
  /// The dynamic shared memory and the offset of its first 1024-aligned
  /// byte past 1 KB (sm90::kSharedReserve).
  std::pair<Value, Value> alignedSharedMemory() {
    auto type = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                MemRefLayoutAttrInterface(), workgroup);
    Value smem = gpu::DynamicSharedMemoryOp::create(b, loc, type);
    Value start = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem);
    Value aligned = arith::AndIOp::create(
        b, loc, add(start, cIdx(sm90::kSharedReserve - 1)),
        cIdx(-sm90::kAtomBytes));
    return {smem, sub(aligned, start)};
  }

  // --- synchronization -------------------------------------------------------
  Value barrierGroup(int n) {
    return nvgpu::MBarrierCreateOp::create(
        b, loc, nvgpu::MBarrierGroupType::get(ctx, workgroup, n));
  }
  void waitParity(Value group, Value stage, Value parity) {
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, group, parity,
                                           cIdx(10000000), stage);
  }
  void expectTx(Value group, Value stage, int64_t bytes,
                Value predicate = Value()) {
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, group, cIdx(bytes), stage,
                                            predicate);
  }
  /// Shared-memory writes of the generic proxy made visible to the async
  /// proxy (wgmma, TMA), then named barrier `id` over `threads` threads.
  void asyncProxyBarrier(Value id, int64_t threads) {
    asyncProxyFence();
    namedBarrier(id, threads);
  }
  /// Shared-memory writes of the generic proxy that precede this in
  /// causality order (this thread's, or other threads' before a barrier
  /// this thread waited at) made visible to the async proxy.
  void asyncProxyFence() {
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  }

  /// Named barrier `id` over `threads` threads (no proxy fence).
  void namedBarrier(Value id, int64_t threads) {
    NVVM::BarrierOp::create(b, loc, Type(), id, c32(threads),
                            NVVM::BarrierReductionAttr(), Value());
  }
  /// The warp's arrival at named barrier `id` over `threads` threads,
  /// without waiting (its shared-memory writes before it are visible to the
  /// threads that wait there).
  void namedBarrierArrive(int32_t id, int64_t threads) {
    statement("bar.arrive " + std::to_string(id) + ", " +
                  std::to_string(threads) + ";",
              "~{memory}");
  }
  /// setmaxnreg of the warp-specialized kernels: the producer warpgroup's
  /// decrease, a consumer warpgroup's increase (which waits for it).
  void producerRegisters() {
    NVVM::SetMaxRegisterOp::create(b, loc, sm90::kProducerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
  }
  void consumerRegisters() {
    NVVM::SetMaxRegisterOp::create(b, loc, sm90::kConsumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
  }

  // --- wgmma and fragments ---------------------------------------------------
  /// The address field of a wgmma descriptor for the shared-memory byte
  /// address `bytes` (i64), or of the descriptor `bytes` itself.
  Value descriptorAddress(Value bytes) {
    return bitAnd(bytes, c64(sm90::kDescriptorAddressMask));
  }
  Value descriptorAddressOf(Value bytes) {
    return descriptorAddress(
        arith::ShRUIOp::create(b, loc, bytes, c64(sm90::kDescriptorShift)));
  }
  /// The descriptor of low word `lo` (address and leading byte offset) and
  /// the upper word of `bits` (stride byte offset, swizzle). The offsets are
  /// added to the low word only (32-bit adds, uniform where `lo` is) and the
  /// words joined by inline PTX: folded by LLVM into one 64-bit constant
  /// add, the upper word was lost in ptxas (CUDA 13 compiled
  /// add.s64 d, base, 0x4000004000010200 as a low-word add).
  Value descriptor(Value lo, int64_t bits) {
    return ptx("mov.b64 $0, {$1, $2};", i64,
               ValueRange{lo, c32(int32_t(uint64_t(bits) >> 32))});
  }
  /// The low word of a descriptor constant `bits` (its leading offset).
  static int32_t descriptorLow(int64_t bits) {
    return int32_t(uint64_t(bits) & 0xffffffffu);
  }
  /// `bytes` as a descriptor offset (a multiple of 16), i32.
  Value descriptorOffset32(int64_t bytes) {
    return c32(bytes >> sm90::kDescriptorShift);
  }
  /// `bytes` as a descriptor offset (a multiple of 16).
  Value descriptorOffset(int64_t bytes) {
    return c64(bytes >> sm90::kDescriptorShift);
  }
  /// The accumulator of `n` f32 registers per thread.
  Type accumulatorType(int64_t n) {
    return LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(n, f32));
  }
  /// acc (+)= A B for one k-step of 16: m64 n`n` k16, A K-major from shared
  /// memory, B K-major (`<col>`, imm-trans-b 0) or MN-major (`<row>`).
  Value wgmma(Value acc, Value descA, Value descB, int64_t n,
              NVVM::WGMMATypes type, bool accumulate, bool bKMajor) {
    return NVVM::WgmmaMmaAsyncOp::create(
        b, loc, acc.getType(), acc, descA, descB,
        NVVM::MMAShapeAttr::get(ctx, 64, n, 16), type, type,
        NVVM::WGMMATypes::f32,
        accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
        bKMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
        NVVM::MMAIntOverflowAttr());
  }
  /// acc += A B for one k-step of 16: m64 n`n` k16 with A from registers
  /// (`a`: 4 i32 of element pairs, the m64 x k16 fragment, which is the
  /// layout of two n8 chunks of an accumulator) and B MN-major from shared
  /// memory (imm-trans-b 1). NVVM's wgmma op takes A only from shared
  /// memory: inline PTX, the accumulator tied in and out. Without
  /// `accumulate` (scale-d 0) the accumulator's input is ignored.
  Value wgmmaRegisterA(Value acc, ValueRange a, Value descB, int64_t n,
                       bool accumulate = true) {
    int64_t nAcc = n / 2;
    std::string asmText, constraints;
    llvm::raw_string_ostream os(asmText), cs(constraints);
    const char *t = elt.isBF16() ? "bf16" : "f16";
    os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << 2 * nAcc + 5
       << ", 0;\nwgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << t
       << "." << t << " {";
    for (int64_t i = 0; i < nAcc; ++i)
      os << (i ? ", $" : "$") << i;
    os << "}, {$" << 2 * nAcc << ", $" << 2 * nAcc + 1 << ", $" << 2 * nAcc + 2
       << ", $" << 2 * nAcc + 3 << "}, $" << 2 * nAcc + 4 << ", p, 1, 1, 1;\n}";
    for (int64_t i = 0; i < nAcc; ++i)
      cs << (i ? ",=f" : "=f");
    for (int64_t i = 0; i < nAcc; ++i)
      cs << "," << i;
    cs << ",r,r,r,r,l,r";
    SmallVector<Value> operands = extractAll(acc, nAcc);
    operands.append(a.begin(), a.end());
    operands.push_back(descB);
    operands.push_back(c32(accumulate ? 1 : 0)); // scale-d
    return LLVM::InlineAsmOp::create(
               b, loc, acc.getType(), operands, asmText, constraints,
               /*has_side_effects=*/true, /*is_align_stack=*/false,
               LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  }
  SmallVector<Value> extractAll(Value acc, int64_t n) {
    SmallVector<Value> out;
    for (int64_t i = 0; i < n; ++i)
      out.push_back(
          LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i}));
    return out;
  }
  /// Max or sum over the 4 threads of a fragment row (lanes differing in
  /// bits 0-1).
  Value quadReduce(Value x, bool isMax) {
    for (int32_t offset : {1, 2}) {
      Value other = gpu::ShuffleOp::create(b, loc, x, c32(offset), c32(32),
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      x = isMax ? maxf(x, other) : addf(x, other);
    }
    return x;
  }
  /// Transposes four i32 registers over the 4 lanes of a fragment row: on
  /// entry lane `q` (lane & 3) holds `a[k]` = A[q][k]; on exit it holds
  /// A[k][q]. Two butterfly stages (lanes xor 2, then xor 1), each swapping
  /// the two registers whose index bit differs from the lane's: 4 shuffles
  /// and 12 selects. Every lane of the warp must run it.
  void quadTranspose(SmallVector<Value> &a, Value q) {
    for (int32_t m : {2, 1}) {
      Value bit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                        bitAnd(q, c32(m)), c32(0));
      for (int k = 0; k < 4; ++k) {
        if (k & m)
          continue;
        Value send = select(bit, a[k], a[k ^ m]);
        Value recv = gpu::ShuffleOp::create(b, loc, send, c32(m), c32(32),
                                            gpu::ShuffleMode::XOR)
                         .getShuffleResult();
        Value keepLow = a[k], keepHigh = a[k ^ m];
        a[k] = select(bit, recv, keepLow);
        a[k ^ m] = select(bit, keepHigh, recv);
      }
    }
  }
  /// Stores rows r and r + 8 of a wgmma accumulator of `columns` columns
  /// (`acc`: its fp32 fragments, element 4j + 2h + e in row r + 8h, column
  /// 8j + 2q + e, q = lane & 3), each row's values times mult[h] (none:
  /// as they are), as element-type pairs. The pairs are transposed over
  /// the 4 lanes of a fragment row (quadTranspose) so that lane q holds
  /// columns 32g + 8q .. + 8 of each group g of 32 columns and stores them
  /// with one 16-byte store (four 4-byte ones where !vectorOk): a warp's
  /// 4-byte stores of the fragments touch 8 rows' lines each, and their
  /// wavefronts were most of an epilogue (docs/performance.md). rowAt(h):
  /// row h's first element; inside(h): whether row h is stored; then(h)
  /// runs where it is. Shuffles need every lane: the transposes run before
  /// the bounds checks.
  void storeAccumulatorRows(ArrayRef<Value> acc, int64_t columns,
                            std::array<Value, 2> mult, Value q, Value vectorOk,
                            function_ref<Value(int)> rowAt,
                            function_ref<Value(int)> inside,
                            function_ref<void(int)> then = {}) {
    Type v4 = VectorType::get({4}, i32);
    const int64_t groups = columns / 32; // 4 lanes x 8 columns each
    for (int h = 0; h < 2; ++h) {
      SmallVector<SmallVector<Value>> chunks;
      for (int64_t g = 0; g < groups; ++g) {
        SmallVector<Value> pairs;
        for (int64_t k = 0; k < 4; ++k) {
          int64_t i = 4 * (4 * g + k) + 2 * h;
          Value lo = acc[i], hi = acc[i + 1];
          if (mult[h]) {
            lo = mulf(lo, mult[h]);
            hi = mulf(hi, mult[h]);
          }
          pairs.push_back(packPair(lo, hi, elt));
        }
        quadTranspose(pairs, q);
        chunks.push_back(pairs);
      }
      ifThen(inside(h), [&] {
        // Lane q's 8 columns of group g: 32 g + 8 q.
        Value rowPtr = gep(rowAt(h), zext64(mul(q, c32(8))), elt);
        ifThen(vectorOk, [&] {
          for (int64_t g = 0; g < groups; ++g) {
            Value chunk = vector::FromElementsOp::create(b, loc, v4, chunks[g]);
            LLVM::StoreOp::create(b, loc, chunk, gepBytes(rowPtr, 64 * g), 16);
          }
        });
        ifThen(bitNot(vectorOk), [&] {
          for (int64_t g = 0; g < groups; ++g)
            for (int64_t m = 0; m < 4; ++m)
              store(chunks[g][m], gepBytes(rowPtr, 64 * g + 4 * m));
        });
        if (then)
          then(h);
      });
    }
  }
  /// Whether a tensor of 2-byte elements (bf16/f16) at `base` with these
  /// strides (in elements) takes 16-byte stores (the runtime asks for
  /// 4-byte alignment only).
  Value sixteenByteAligned(Value base, ValueRange strides) {
    Value bits = LLVM::PtrToIntOp::create(b, loc, i64, base);
    for (Value s : strides)
      bits = bitOr(bits, shl(s, c64(1)));
    return eq(bitAnd(bits, c64(15)), c64(0));
  }
  /// packPair as one `cvt` that stays where it is emitted: after the
  /// wgmma wait that frees the registers it may be given (an A operand of
  /// wgmma defined while the wgmma that reads it is in flight serializes
  /// the wgmmas, ptxas C7513).
  Value packPairHere(Value x0, Value x1) {
    const char *code = elt.isBF16() ? "cvt.rn.bf16x2.f32 $0, $2, $1;"
                                    : "cvt.rn.f16x2.f32 $0, $2, $1;";
    return LLVM::InlineAsmOp::create(
               b, loc, i32, ValueRange{x0, x1}, code, "=r,f,f",
               /*has_side_effects=*/true, /*is_align_stack=*/false,
               LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  }
  /// Two f32 as one i32 of two `element` (bf16 or f16) values, x0 low.
  Value packPair(Value x0, Value x1, Type element) {
    Value pair = vector::FromElementsOp::create(
        b, loc, VectorType::get({2}, f32), ValueRange{x0, x1});
    Value narrow =
        arith::TruncFOp::create(b, loc, VectorType::get({2}, element), pair);
    return vector::ExtractOp::create(
        b, loc,
        vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), narrow),
        ArrayRef<int64_t>{0});
  }

  // --- tile lists and interval masks (docs/attention.md, Masking) ------------
  /// A decoded tile-list entry (DescriptorLayout.h) over tiles of `width`
  /// columns.
  struct TileEntry {
    Value word, state, needMask, isPartial, isFull, tileStart;
  };
  /// `bound`: the sequence's length along the columns. Tile states count
  /// in-bounds columns only: a tile that crosses `bound` is checked against
  /// it even when full.
  TileEntry decodeEntry(Value word, int64_t width, Value bound) {
    TileEntry entry;
    entry.word = word;
    using ::cmask::abi::TileState;
    entry.state = entryField(word, ::cmask::abi::kEntryState);
    entry.tileStart =
        mul(entryField(word, ::cmask::abi::kEntryTile), c32(width));
    entry.isPartial = eq(entry.state, c32(int(TileState::Partial)));
    entry.isFull = eq(entry.state, c32(int(TileState::Full)));
    Value crosses =
        cmp(arith::CmpIPredicate::sgt, add(entry.tileStart, c32(width)), bound);
    entry.needMask = arith::OrIOp::create(b, loc, entry.isPartial, crosses);
    return entry;
  }
  /// The first slot's (lo | hi << 32) of the thread's two rows (i64 element
  /// indices `rows` of the (lo, hi) pairs in `intervals`), loaded when the
  /// tile needs masking; `[0, bound)` for a full tile that crosses `bound`.
  SmallVector<Value> firstSlots(const TileEntry &entry, Value intervals,
                                const Value rows[2], Value bound) {
    Value zero = c64(0);
    return ifElse(
        entry.needMask, {i64, i64},
        [&] {
          return ifElse(
              entry.isPartial, {i64, i64},
              [&] {
                Value k0 = zext64(
                    entryField(entry.word, ::cmask::abi::kEntryFirstSlot));
                SmallVector<Value> out;
                for (int h = 0; h < 2; ++h)
                  out.push_back(
                      load(i64, gep(intervals, add(rows[h], k0), i64), 8));
                return out;
              },
              [&] {
                Value bounds =
                    arith::ShLIOp::create(b, loc, zext64(bound), c64(32));
                return SmallVector<Value>{bounds, bounds};
              });
        },
        [&] { return SmallVector<Value>{zero, zero}; });
  }
  /// Per row half, `nWords` 32-column words of the tile's visibility: bit
  /// 8*(j%4)+e of word j/4 is element (j, e) of the thread's fragment row
  /// (columns 8j + 2q + e, `lane2q` = 2q); all zero when the tile needs no
  /// mask. The bits of a slot [lo, hi) are `bmsk.clamp` of its part in each
  /// word: the unsigned check (j - lo) < (hi - lo), 32 columns at a time.
  SmallVector<Value> visibilityWords(const TileEntry &entry, ValueRange first,
                                     Value intervals, const Value rows[2],
                                     int64_t nWords, Value lane2q) {
    SmallVector<Type> types(2 * nWords, i32);
    return ifElse(
        entry.needMask, types,
        [&] {
          // OR the bits of [lo, hi) - tileStart into the row's words.
          auto addSlot = [&](Value pair, ArrayRef<Value> words) {
            Value lo = trunc32(pair);
            Value hi = trunc32(arith::ShRUIOp::create(b, loc, pair, c64(32)));
            Value a = sub(lo, entry.tileStart), bb = sub(hi, entry.tileStart);
            SmallVector<Value> out;
            for (int64_t w = 0; w < nWords; ++w) {
              Value aw = w ? sub(a, c32(32 * w)) : a;
              Value bw = w ? sub(bb, c32(32 * w)) : bb;
              Value start = maxs(aw, c32(0));
              Value width = maxs(sub(bw, start), c32(0));
              Value bits =
                  ptx("bmsk.clamp.b32 $0, $1, $2;", i32, {start, width});
              out.push_back(bitOr(words[w], bits));
            }
            return out;
          };
          SmallVector<Value> words;
          for (int h = 0; h < 2; ++h) {
            SmallVector<Value> zeros(nWords, c32(0));
            llvm::append_range(words, addSlot(first[h], zeros));
          }
          // The other slots that intersect the tile (partial tiles only).
          Value k0 = entryField(entry.word, ::cmask::abi::kEntryFirstSlot);
          Value ns = entryField(entry.word, ::cmask::abi::kEntrySlotCount);
          Value end = select(entry.isPartial, add(k0, ns), add(k0, c32(1)));
          words =
              loop(sext64(add(k0, c32(1))), sext64(end), words,
                   [&](Value k, SmallVector<Value> carried) {
                     SmallVector<Value> out;
                     for (int h = 0; h < 2; ++h) {
                       Value pair =
                           load(i64, gep(intervals, add(rows[h], k), i64), 8);
                       llvm::append_range(
                           out, addSlot(pair, ArrayRef<Value>(carried).slice(
                                                  h * nWords, nWords)));
                     }
                     return out;
                   });
          // The thread's columns 2q, 2q+1 of every 8 to bits 0, 1 of each byte.
          for (Value &w : words)
            w = shr(w, lane2q);
          return words;
        },
        [&] { return SmallVector<Value>(2 * nWords, c32(0)); });
  }

  Type gptr, sptr;
  Type elt; ///< the operands' element type (bf16 or f16)
  NVVM::WGMMATypes wgmmaType;
  Attribute workgroup;
};

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_HOPPEREMITTER_H
