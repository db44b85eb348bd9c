"""Issue 34 item 2: a review gate bound to the config and to every byte. Each test failed on
the code before the fix (approvers read from the staged review.json, added files and symlinks
published, two approvals at once -> "changed after it was staged")."""

from __future__ import annotations

import hashlib
import json
import os
import threading

import pytest

from sdc.io.write import sha256_bytes
from sdc.publish.review import ReviewError, approve, reject, stage_release


def _config(tmp_path, approvers):
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"name: w\nreview: {{required: true, approvers: {json.dumps(approvers)}}}\n")
    return cfg


def _stage(tmp_path, approvers=("alice", "bob")):
    """A release staged for review (no Prefect): its audit.json names the config file."""
    cfg = _config(tmp_path, list(approvers))
    text = cfg.read_text(encoding="utf-8")
    public = {"microdata.csv": b"record_id,sex\n1,1\n", "codebook.md": b"# codebook\n"}
    internal = {"blocks.parquet": b"x"}
    audit = {"public_files": {k: sha256_bytes(v) for k, v in public.items()},
             "internal_files": {k: sha256_bytes(v) for k, v in internal.items()},
             "config": {"text": text, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                        "source_path": str(cfg)}}
    internal["audit.json"] = json.dumps(audit).encode()
    out = tmp_path / "releases" / "w"
    stage_release(out, public, internal, force=False, approvers=list(approvers))
    return out, out.with_name("w.staged"), cfg


def test_a_name_added_to_review_json_cannot_approve(tmp_path):
    out, staged, _ = _stage(tmp_path)
    rj = staged / "internal" / "review.json"
    rec = json.loads(rj.read_text())
    rec["approvers"].append("mallory")
    rj.write_text(json.dumps(rec))
    with pytest.raises(ReviewError, match="'mallory' is not among the approvers"):
        approve(staged, "mallory")
    assert not out.exists()


def test_a_config_changed_after_staging_refuses_the_approval(tmp_path):
    out, staged, cfg = _stage(tmp_path)
    cfg.write_text(cfg.read_text().replace("bob", "mallory"))
    with pytest.raises(ReviewError, match="changed since the release was staged"):
        approve(staged, "mallory")
    with pytest.raises(ReviewError, match="changed since the release was staged"):
        approve(staged, "alice")
    assert not out.exists()
    reject(staged, "alice")       # a tampered release can always be discarded
    assert not staged.exists()


@pytest.mark.parametrize("change", ["added_file", "added_folder", "added_internal", "removed",
                                    "changed", "symlinked_file", "symlinked_folder"])
def test_every_staged_entry_is_bound(tmp_path, change):
    out, staged, _ = _stage(tmp_path)
    pub = staged / "public"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("id,name\n1,Ann\n")
    expect = {"added_file": "added: public/extra.csv",
              "added_folder": "added: public/more",
              "added_internal": "added: internal/notes.txt",
              "removed": "removed: public/codebook.md",
              "changed": "changed: public/codebook.md",
              "symlinked_file": "symlinked: public/codebook.md",
              "symlinked_folder": "symlinked: public/more"}[change]
    if change == "added_file":
        (pub / "extra.csv").write_text("id,name\n1,Ann\n")
    elif change == "added_folder":
        (pub / "more").mkdir()
    elif change == "added_internal":
        (staged / "internal" / "notes.txt").write_text("x")
    elif change == "removed":
        (pub / "codebook.md").unlink()
    elif change == "changed":
        (pub / "codebook.md").write_text("# edited\n")
    elif change == "symlinked_file":
        data = (pub / "codebook.md").read_bytes()
        (outside / "codebook.md").write_bytes(data)   # the same bytes, through a link
        (pub / "codebook.md").unlink()
        (pub / "codebook.md").symlink_to(outside / "codebook.md")
    else:
        (pub / "more").symlink_to(outside)
    with pytest.raises(ReviewError, match="changed after it was staged") as e:
        approve(staged, "alice")
    assert expect in str(e.value)
    assert not out.exists()


def test_a_staged_folder_that_is_a_symlink_is_never_published(tmp_path):
    out, staged, _ = _stage(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    os.rename(staged, elsewhere)
    staged.symlink_to(elsewhere)
    with pytest.raises(ReviewError, match="is a symlink"):
        approve(staged, "alice")
    with pytest.raises(ReviewError, match="is a symlink"):
        approve(out, "alice")
    assert not out.exists() and not out.is_symlink() and elsewhere.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a folder's owner needs root")
def test_a_staged_folder_of_another_user_is_refused(tmp_path):
    out, staged, _ = _stage(tmp_path)
    os.chown(staged, 12345, -1)
    with pytest.raises(ReviewError, match="belongs to user id 12345"):
        approve(staged, "alice")
    assert not out.exists()


@pytest.mark.parametrize("decided_by", ["reject", "approve"])
def test_a_decision_that_reads_a_folder_decided_meanwhile_is_told_so(tmp_path, monkeypatch,
                                                                     decided_by):
    """A decision that finds review.json, then has the folder rejected (deleted) or approved
    (moved) by another before it reads the file, is told that the release was decided, not
    that review.json is unreadable (the race test_concurrent_decisions_one_wins met once in
    a fresh-clone make test: bob's rmtree between alice's is_file() and read_text())."""
    from pathlib import Path

    out, staged, _ = _stage(tmp_path)
    review = staged / "internal" / "review.json"
    real = Path.read_text

    def decided_meanwhile(self, *args, **kwargs):
        if self == review:
            monkeypatch.setattr(Path, "read_text", real)  # the other decision, once
            (reject if decided_by == "reject" else approve)(staged, "bob")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", decided_meanwhile)
    with pytest.raises(ReviewError) as e:
        approve(staged, "alice")
    want = "no release awaits review" if decided_by == "reject" else "already approved by bob"
    assert want in str(e.value)


@pytest.mark.parametrize("second", ["approve", "reject"])
def test_concurrent_decisions_one_wins(tmp_path, second):
    """Two decisions at once (threads: each opens its own descriptor, so flock decides as
    between processes), 5 rounds: exactly one wins; an approval that loses is told who
    approved."""
    for i in range(5):
        root = tmp_path / str(i)
        root.mkdir()
        out, staged, _ = _stage(root)
        barrier = threading.Barrier(2)
        results: dict[str, object] = {}

        def go(who: str, what: str, barrier=barrier, results=results, staged=staged) -> None:
            barrier.wait()
            try:
                results[who] = (approve if what == "approve" else reject)(staged, who)
            except Exception as e:  # the test inspects it
                results[who] = e

        ts = [threading.Thread(target=go, args=("alice", "approve")),
              threading.Thread(target=go, args=("bob", second))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        errors = [r for r in results.values() if isinstance(r, Exception)]
        assert len(errors) == 1, results
        assert isinstance(errors[0], ReviewError), errors[0]
        winner = next(k for k, r in results.items() if not isinstance(r, Exception))
        if (out / "internal" / "audit.json").is_file():     # approved: by the winner
            rev = json.loads((out / "internal" / "audit.json").read_text())["review"]
            assert rev["approved_by"] == winner and not staged.exists()
            assert f"already approved by {winner}" in str(errors[0])
        else:
            assert winner == "bob" and second == "reject" and not staged.exists()
            assert "no release awaits review" in str(errors[0])


def test_a_late_approval_is_told_who_approved(tmp_path):
    out, staged, _ = _stage(tmp_path)
    approve(staged, "bob")
    with pytest.raises(ReviewError, match="already approved by bob"):
        approve(staged, "alice")
