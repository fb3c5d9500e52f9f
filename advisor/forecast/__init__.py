"""Forecasting core: from a loss history to final loss, ETA, plateau and divergence probabilities.

Pure numerics (numpy + scipy): no clock, no I/O, no Kubernetes. ``forecast`` is the stable
contract described in DESIGN.md; ``forecast_curve`` is the same for a caller holding an
``advisor.model.Curve`` (it fits the last restart segment).
"""

from advisor.forecast.core import forecast, forecast_curve, forecast_with_parts

__all__ = ["forecast", "forecast_curve", "forecast_with_parts"]
