"""benchmarks/peers.py on the CPU: nvidia-smi's samples read and matched to
timed windows (ClockLog); a peer that is not installed is skipped
with a note (setup_if_installed), any other failure of its set-up is not;
and the endpoints that cuDNN flex is given from cmask's interval table
(selfcheck: against a plain reference on random slot tables)."""

import contextlib
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("peers", ROOT / "benchmarks" / "peers.py")
peers = importlib.util.module_from_spec(spec)
sys.modules["peers"] = peers  # its dataclasses look their module up
spec.loader.exec_module(peers)


def fake_peer(setup):
    return peers.Peer("fake", "Fake peer", "blhd", lambda wl: True, setup)


def test_a_peer_that_does_not_import_is_skipped_with_a_note(capsys):
    def setup(wl, x, train):
        import cmask_no_such_peer_package  # noqa: F401
    assert peers.setup_if_installed(fake_peer(setup), None, None, False) is None
    err = capsys.readouterr().err
    assert "Fake peer: not installed" in err and "cmask_no_such_peer_package" in err


def test_a_peer_that_imports_is_set_up():
    made = peers.Setup(lambda q, k, v: q)
    assert peers.setup_if_installed(fake_peer(lambda wl, x, train: made), None, None,
                                    True) is made


def test_other_set_up_errors_are_not_hidden():
    def setup(wl, x, train):
        raise RuntimeError("out of memory")
    with pytest.raises(RuntimeError, match="out of memory"):
        peers.setup_if_installed(fake_peer(setup), None, None, False)


def test_endpoints_against_the_reference():
    peers.selfcheck(rows=300, K=4, k_len=48, seed=2)


SMI = """0, 2026/12/07 09:40:45.100, 1515
1, 2026/12/07 09:40:45.100, 345
0, 2026/12/07 09:40:45.150, [N/A]
0, 2026/12/07 09:40:45.200, 1530
0, 2026/12/07 09:40:45.250, 1980
0, 2026/12/07 09:40:45.3"""


def at(clock):
    return peers.datetime.strptime(clock, "%Y/%m/%d %H:%M:%S.%f").timestamp()


def test_nvidia_smi_lines_of_one_gpu_read():
    got = peers.smi_samples(SMI.splitlines(), device=0)
    assert [m for _, m in got] == [1515, 1530, 1980]
    assert got[0][0] == pytest.approx(at("2026/12/07 09:40:45.100"))
    assert len(peers.smi_samples(SMI.splitlines())) == 4  # every GPU's


def test_clock_stats_are_the_medians_inside_the_windows():
    log = peers.ClockLog()
    log.samples = peers.smi_samples(SMI.splitlines(), device=0)
    t = at("2026/12/07 09:40:45.000")
    assert log.stats([(t, t + 0.21)]) == (1522.5, 2)
    assert log.stats([(t, t + 0.11), (t + 0.24, t + 0.26)]) == (1747.5, 2)
    assert log.stats([(t + 0.19, t + 0.21)]) == (1530, 1)
    assert log.stats([(t + 0.3, t + 0.4)]) is None


def test_a_clock_log_without_samples_gives_none():
    log = peers.ClockLog()
    assert log.stats([(0.0, 1e12)]) is None


def test_a_clock_log_without_nvidia_smi_opens_and_closes(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi there
    with peers.ClockLog() as log:
        pass
    assert log.samples == [] and log.stats([(0.0, 1e12)]) is None


def test_a_disabled_clock_log_samples_nothing():
    with peers.ClockLog(enabled=False) as log:
        pass
    assert log.samples == [] and log.stats([(0.0, 1e12)]) is None


def test_a_clock_log_reads_a_running_nvidia_smi(monkeypatch, tmp_path):
    # A stand-in nvidia-smi: one line now (local time, its format), then
    # more every 20 ms until terminated.
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nwhile true; do\n"
                    "  echo \"0, $(date '+%Y/%m/%d %H:%M:%S.%3N'), 1500\"\n"
                    "  sleep 0.02\ndone\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one GPU reports: its samples count
    t0 = peers.time.time()
    with peers.ClockLog(period_ms=20) as log:
        peers.time.sleep(0.3)
    t1 = peers.time.time()
    assert log.samples, "no sample read"
    mhz, n = log.stats([(t0 - 1, t1 + 1)])
    assert mhz == 1500 and n == len(log.samples) >= 3


def test_two_fields_read_and_windows_select_samples():
    lines = ["0, 2026/12/07 09:40:45.100, 1515, 679.12",
             "0, 2026/12/07 09:40:45.200, 1530, [N/A]",
             "0, 2026/12/07 09:40:45.300, 1545, 690.5"]
    log = peers.ClockLog(fields=("clocks.sm", "power.draw"))
    log.samples = peers.smi_samples(lines, device=0, fields=2)
    assert [s[1:] for s in log.samples] == [(1515, 679.12), (1545, 690.5)]
    t = at("2026/12/07 09:40:45.250")
    assert [s[1:] for s in log.inside([(t, t + 1)])] == [(1545, 690.5)]
    assert log.stats([(t - 1, t + 1)]) == (1530, 2)


def test_sample_iters_lengthens_short_calls_only():
    assert peers.sample_iters(13.0, 10, 0) == 10  # off
    assert peers.sample_iters(13.0, 10, 1000) == 77  # ceil(1000 / 13)
    assert peers.sample_iters(200.0, 10, 1000) == 10  # long calls keep --iters
    assert peers.sample_iters(1e-6, 10, 1000) == 20000  # bounded (one CUDA event a call)
    assert peers.sample_iters(0.0, 10, 1000) == 10  # no probe time: --iters


def test_time_rounds_sizes_each_calls_samples_from_its_probe(monkeypatch):
    per_call = {"fast": 2.0, "slow": 50.0}
    seen = []

    def fake_timeit(fn, iters=10, warm=2):
        key = fn()
        seen.append((key, iters))
        return per_call[key]
    monkeypatch.setattr(peers, "timeit", fake_timeit)
    calls = {k: ((lambda k=k: k), contextlib.nullcontext) for k in per_call}
    medians, errors = peers.time_rounds(calls, iters=10, rounds=2, sample_ms=1000)
    assert medians == per_call and not errors
    assert seen[:2] == [("fast", 3), ("slow", 3)]  # the probes
    assert sorted(seen[2:]) == [("fast", 500), ("fast", 500), ("slow", 20), ("slow", 20)]
    seen.clear()
    peers.time_rounds(calls, iters=10, rounds=1)
    assert sorted(seen) == [("fast", 10), ("slow", 10)]  # no probe without sample_ms
