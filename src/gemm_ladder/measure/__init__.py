"""Measurements: the ladder benchmark, GPU clocks, compile report, SASS inspection."""
