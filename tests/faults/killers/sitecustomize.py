"""Imported at start-up by the Spark Python workers of tests/faults/test_17 (their PYTHONPATH starts
here): the first worker to take a batch of the cascade's first executor pass kills itself with
SIGKILL, a real crash of an executor process in the middle of a job. Which worker is the first is
decided by an O_EXCL create of the flag file, so exactly one dies per flag file."""

import os

FLAG = os.environ.get("DEDUP_TEST_KILL_WORKER_FLAG")

if FLAG:
    import signal

    import dedup_tasks.engines.spark as spark_engine

    _conformed = spark_engine._conformed

    def _conformed_or_die(rb):
        try:
            fd = os.open(FLAG, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return _conformed(rb)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
        return None

    spark_engine._conformed = _conformed_or_die
