"""Calibration scripts: read the development data and print the parameters the simulator ships."""
