"""``python -m workers [options]`` is ``fleetsched worker [options]`` (settings from the environment)."""

import sys

from scheduler.cli.app import main

if __name__ == "__main__":
    sys.argv = ["fleetsched", "worker", *sys.argv[1:]]
    main()
