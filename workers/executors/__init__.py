"""Old import path of the executor contract (``workers.executors.base``), kept for plugins.

The executors live with the actions in :mod:`tasks.executors`; the contract in :mod:`tasks.host`.
"""
