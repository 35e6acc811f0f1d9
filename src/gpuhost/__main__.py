"""``python -m gpuhost`` and the ``gpuhost`` command (``run``): signals are taken care of from
the first line, before the CLI is imported (``gpuhost.signals.defer_until_started``)."""

from gpuhost import signals


def run() -> None:
    signals.defer_until_started()
    from gpuhost.cli import main

    main()


if __name__ == "__main__":
    run()
