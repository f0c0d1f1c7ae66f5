"""Pure values and rules of disruption: durations, protection, windows, budgets, phases, notices.

Nothing in this package performs I/O or reads the clock: every function that needs the time is
given ``now``. Values are frozen dataclasses and ``str`` enums. ``.importlinter`` enforces this.
"""
