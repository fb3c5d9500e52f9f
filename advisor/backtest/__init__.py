"""The back-test: real training runs replayed, as they happened, through the controller's path.

``runs`` reads the runs (files or folders, any format ``advisor.sources`` reads), ``replay`` feeds
each one's progress to the core loop as ``status.trainerStatus`` objects under every policy,
``baselines`` are the rules a platform would use without the advisor, and ``verdict`` judges every
decision against what the run did afterwards.
"""
