"""The discrete-event simulator: a simulated clock, cluster and actors driving the real engine.

It may import domain/, engine/ and manifests/; it reads no files and no wall clock (the CLI loads
scenario files and hands their parsed documents in).
"""
