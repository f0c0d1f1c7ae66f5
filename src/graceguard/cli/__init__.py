"""The ``graceguard`` command (typer + rich). The shell around the pure core: reads files and the
clock, prints results. Bad input ends with exit code 2 and one line saying what is wrong."""
