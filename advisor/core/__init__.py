"""The core loop shared by the controller and the simulator (observe → forecast → decide).

Pure: no kopf, no kubernetes client, no asyncio, no wall clock. See :mod:`advisor.core.loop`.
"""

from advisor.core.history import History, Point
from advisor.core.loop import AdvisorCore, JobRecord

__all__ = ["AdvisorCore", "History", "JobRecord", "Point"]
