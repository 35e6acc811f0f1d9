"""Safe fleet upgrades: snapshot, drain, move to a new pinned set, reboot, validate, roll back.

Pure parts (journal, orchestration state machine, snapshot document and diff, providers) have no
SSH in them; ``hoststeps`` binds the state machine's steps to real hosts through pyinfra.
"""
