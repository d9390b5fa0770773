"""``python -m scheduler ARGS`` is ``fleetsched ARGS`` (the demo and the tests start workers
this way, with ``-P`` so the working directory cannot shadow the package)."""

from scheduler.cli.app import main

if __name__ == "__main__":
    main()
