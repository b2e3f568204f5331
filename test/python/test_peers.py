"""benchmarks/peers.py on the CPU: nvidia-smi's samples read and matched to
timed windows (ClockLog); a peer that is not installed is skipped
with a note (setup_if_installed), any other failure of its set-up is not;
and the endpoints that cuDNN flex is given from cmask's interval table
(selfcheck: against a plain reference on random slot tables)."""

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


SMI = """0, 2026/12/07 09:40:45.100, 1515, 679.12
1, 2026/12/07 09:40:45.100, 345, 70.00
0, 2026/12/07 09:40:45.150, [N/A], 680.00
0, 2026/12/07 09:40:45.200, 1530, 681.50
0, 2026/12/07 09:40:45.250, 1980, 119.
0, 2026/12/07 09:40:45.3"""


def at(clock):
    return peers.datetime.strptime(clock, "%Y/%m/%d %H:%M:%S.%f").timestamp()


def test_nvidia_smi_lines_of_one_gpu_read():
    got = peers.smi_samples(SMI.splitlines(), device=0)
    assert [(m, w) for _, m, w in got] == [(1515, 679.12), (1530, 681.5), (1980, 119.0)]
    assert got[0][0] == pytest.approx(at("2026/12/07 09:40:45.100"))
    assert len(peers.smi_samples(SMI.splitlines())) == 4  # every GPU's


def test_clock_stats_are_the_medians_inside_the_windows():
    log = peers.ClockLog()
    log.samples = peers.smi_samples(SMI.splitlines(), device=0)
    t = at("2026/12/07 09:40:45.000")
    assert log.stats([(t, t + 0.21)]) == (1522.5, 680.31)
    assert log.stats([(t, t + 0.11), (t + 0.24, t + 0.26)]) == (1747.5, 399.06)
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
