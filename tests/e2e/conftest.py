"""The planning memo (tests/plan_memo.py) on for every test here: a case planned by several
executors, audits and the library in one process is planned once."""

from tests.plan_memo import plan_memo  # noqa: F401 - an autouse fixture
