"""Executors: how a job's operations reach a host (ssh, local, simulate)."""
