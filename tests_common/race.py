"""Run jobs really concurrently, as two Airflow tasks would: threads against one warehouse, each with its
own Spark session (``spark.newSession()``: its own SQL conf, so commit metadata does not leak between
them), sharing one JVM so no extra Spark start-up is paid."""

from __future__ import annotations

import threading


def race(spark, count: int, action):
    """Run ``action(session, i)`` in ``count`` threads started at once, each with its own Spark session;
    return what each returned or raised."""
    barrier = threading.Barrier(count)
    outcomes: list = [None] * count
    sessions = [spark.newSession() for _ in range(count)]

    def runner(i):
        barrier.wait()
        try:
            outcomes[i] = action(sessions[i], i)
        except Exception as exc:  # the loser's error is part of the outcome
            outcomes[i] = exc

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
