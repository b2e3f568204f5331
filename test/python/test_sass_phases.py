"""benchmarks/sass_phases.py on a small source page: the step loop found
by the HGMMAs' execution count and cut at its wgmma waits."""

import csv
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sass_phases", ROOT / "benchmarks" / "sass_phases.py")
sass_phases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sass_phases)

HEAD = ["Address", "Source", "Warp Stall Sampling (All Samples)",
        "Warp Stall Sampling (Not-issued Samples)", "Instructions Executed",
        "stall_dispatch", "stall_wait", "stall_barrier", "stall_dispatch (Not Issued)"]


def write_page(path, rows):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "k"])
        w.writerow(HEAD)
        for i, (src, samples, executed, dispatch, wait, barrier) in enumerate(rows):
            w.writerow([hex(16 * i), src, f"{samples:,}", f"{samples // 2:,}", f"{executed:,}",
                        dispatch, wait, barrier, "7"])


def test_phases_cut_at_the_wgmma_waits(tmp_path):
    page = tmp_path / "sass-0.csv"
    write_page(page, [
        ("LDC R1, c[0x0][0x28]", 50, 12, 0, 50, 0),             # prologue
        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], RZ", 30, 1000, 5, 5, 0),
        ("HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[UR16]", 20, 1000, 20, 0, 0),
        ("WARPGROUP.DEPBAR.LE gsb0, 0x1", 40, 1000, 0, 0, 40),
        ("FMNMX R15, R24, R25, !PT", 1_200, 995, 200, 1_000, 0),
        ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 2, 1000, 1, 0, 1),
        ("FMUL R88, R88, R23", 9, 1000, 9, 0, 0),
        ("@P0 BRA 0x100", 1, 1000, 0, 1, 0),
        ("STG.E [R2], R4", 100, 8, 0, 100, 0),                  # epilogue
    ])
    parts, total, outside = sass_phases.phases(sass_phases.read_source_page(page))
    assert total == 1_452
    assert outside == 150  # the prologue and the epilogue
    names = [n for n, _ in parts]
    assert names == ["issue", "wait 1", "after wait 1", "wait 2", "after wait 2"]
    by = dict(parts)
    assert by["issue"]["instructions"] == 2 and by["issue"]["samples"] == 50
    # The per-reason columns are the all-samples ones, not "(Not Issued)".
    assert by["issue"]["reasons"] == {"dispatch": 25, "wait": 5, "barrier": 0}
    assert by["after wait 1"]["samples"] == 1_200
    assert by["after wait 2"]["instructions"] == 2
    text = sass_phases.report([("k", page)])
    assert "unlisted 20" in text  # issue: 50 samples, 30 with a reason


def test_a_page_without_the_header_is_an_error(tmp_path):
    page = tmp_path / "bad.csv"
    page.write_text("Kernel Name,k\nfoo,bar\n")
    with pytest.raises(SystemExit, match="no source-page header"):
        sass_phases.read_source_page(page)


def test_summary_lists_the_largest_and_every_instruction(tmp_path):
    page = tmp_path / "sass-0.csv"
    write_page(page, [
        ("LDC R1, c[0x0][0x28]", 50, 12, 0, 50, 0),
        ("FMNMX R15, R24, R25, !PT", 1_200, 995, 200, 1_000, 0),
        ("STG.E [R2], R4", 100, 8, 0, 100, 0),
    ])
    details = tmp_path / "details.csv"
    details.write_text('"ID","Metric Name","Metric Unit","Metric Value"\n'
                       '"0","Duration","us","12.5"\n"0","L1 Hit Rate","%","3"\n')
    text = sass_phases.summary(page, details)
    lines = text.splitlines()
    assert lines[0] == "instructions 3, stall samples 1350"
    assert "  Duration: 12.5 us" in lines and not any("L1 Hit" in x for x in lines)
    assert lines[2].startswith("reasons: wait 85.2%, dispatch 14.8%")
    top = lines[lines.index(next(x for x in lines if x.lstrip().startswith("share"))) + 1]
    assert top.split()[:5] == ["88.9%", "1200", "600", "995", "FMNMX"]
    listing = lines[lines.index("listing") + 1:]
    assert len(listing) == 3 and "STG.E" in listing[2] and "wait:100" in listing[2]


def test_classes_sum_the_step_loop_per_opcode(tmp_path):
    page = tmp_path / "sass-0.csv"
    write_page(page, [
        ("LDC R1, c[0x0][0x28]", 50, 12, 0, 50, 0),             # outside the loop
        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], RZ", 30, 1000, 5, 5, 0),
        ("MUFU.EX2 R3, R3", 40, 1000, 0, 40, 0),
        ("@!P0 MUFU.EX2 R4, R4", 10, 1000, 2, 8, 0),
        ("FMNMX R15, R24, R25, !PT", 60, 995, 20, 40, 0),
    ])
    got = dict(sass_phases.classes(sass_phases.read_source_page(page)))
    assert list(got) == ["FMNMX", "MUFU", "HGMMA"]  # the largest first; no LDC
    assert got["MUFU"]["instructions"] == 2 and got["MUFU"]["samples"] == 50
    assert got["MUFU"]["reasons"]["wait"] == 48
    assert sass_phases.opcode("@!P0 BRA 0x100") == "BRA"
    assert "MUFU" in sass_phases.class_report([("k", page)])
