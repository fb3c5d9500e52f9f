"""Forecasting core: from a loss history to final loss, ETA, plateau and divergence probabilities.

Pure numerics (numpy + scipy): no clock, no I/O, no Kubernetes. ``forecast`` is the stable
contract described in DESIGN.md; ``forecast_curve`` is the same for a caller holding an
``advisor.model.Curve`` (it fits the last restart segment); ``forecast_path`` adds the forecast
along the steps to the end (for plots).
"""

from advisor.forecast.core import forecast, forecast_curve, forecast_with_parts
from advisor.forecast.path import ForecastPath, forecast_path

__all__ = ["ForecastPath", "forecast", "forecast_curve", "forecast_path", "forecast_with_parts"]
