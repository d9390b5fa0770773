"""fleetsched's tests, grouped like the code (tests/queue, tests/record, tests/workers, ...).

pytest-xdist starts its worker processes with ``COLUMNS=80`` and ``LINES=24``; rich fixes a
console's width from ``COLUMNS`` when the console is made (at import), so the CLI would render
80 columns in a worker whatever width a test asks for. The tests set the width they read per
call (``tests.cli_support``), so none is inherited here.
"""

import os

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
