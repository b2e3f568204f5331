"""benchmarks/peers.py on the CPU: a peer that is not installed is skipped
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
