"""trainjob-advisor: a progress-aware scheduling and checkpoint advisor for GPU training on Kubernetes."""

__version__ = "0.2.1"
