"""A Beam Python worker pool on loopback: `python -m pipeline.runners.worker_pool
--service_port=PORT`. The executors on the same machine reach it as localhost:PORT (run one on
each Spark worker machine, `--worker-pool localhost:PORT`); Beam's own worker_pool_main takes
the same flags and listens on every interface, unauthenticated.
"""

from __future__ import annotations

from pipeline.runners import loopback


def main() -> None:
    from apache_beam.runners.worker import worker_pool_main

    loopback.bind_beam_servers_to_loopback()
    worker_pool_main.main()


if __name__ == "__main__":
    main()
