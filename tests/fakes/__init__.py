"""Fakes at the hardware boundary: a sysfs tree in a directory, a pynvml module."""
