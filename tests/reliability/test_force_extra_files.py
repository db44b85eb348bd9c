"""Red-team run: ``--force`` silently deleted files staff put into a
release folder (an ``APPROVAL.txt``, a signature ``public/microdata.csv.asc``).

Decision (docs/RELEASE_FOLDER.md): ``--force`` refuses (exit 2) and lists every file the
release did not write (not in its ``internal/audit.json``); ``--force --discard-extra-files``
deletes them with the old release. Nothing is computed before the refusal.
"""

from __future__ import annotations

from .conftest import JobBuilder, contains


def _release_with_extras(job: JobBuilder, cli) -> None:
    assert cli("release", job.write()).exit_code == 0
    (job.out_dir / "APPROVAL.txt").write_text("approved by J. Doe\n")
    (job.out_dir / "public" / "microdata.csv.asc").write_text("-----BEGIN PGP SIGNATURE-----\n")


def test_force_refuses_and_lists_staff_files(job: JobBuilder, cli) -> None:
    _release_with_extras(job, cli)
    before = {p.relative_to(job.out_dir): p.read_bytes() for p in job.out_dir.rglob("*")
              if p.is_file()}
    for engine in ("pandas", "streaming"):
        res = cli("release", job.config_path, "--force", "--engine", engine)
        assert res.exit_code == 2, res.output
        assert contains(res.output, "holds 2 file(s) the release did not write: APPROVAL.txt, "
                                    "public/microdata.csv.asc")
        assert contains(res.output, "--discard-extra-files")
    after = {p.relative_to(job.out_dir): p.read_bytes() for p in job.out_dir.rglob("*")
             if p.is_file()}
    assert after == before
    assert job.leftovers() == [job.out_dir]


def test_discard_extra_files_deletes_them_explicitly(job: JobBuilder, cli) -> None:
    _release_with_extras(job, cli)
    res = cli("release", job.config_path, "--force", "--discard-extra-files")
    assert res.exit_code == 0, res.output
    assert not (job.out_dir / "APPROVAL.txt").exists()
    assert not (job.out_dir / "public" / "microdata.csv.asc").exists()
    assert cli("audit", job.out_dir).exit_code == 0


def test_force_without_extra_files_still_replaces(job: JobBuilder, cli) -> None:
    assert cli("release", job.write()).exit_code == 0
    assert cli("release", job.config_path, "--force").exit_code == 0
