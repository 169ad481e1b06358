"""The training section's network, plan and warning settings, for ``train`` and for ``verify``'s refinement (which
retrains with the settings a training.nc records), so that no command imports another.
"""
from __future__ import annotations

from omegaconf import DictConfig

from sensitivity.settings import Thresholds, TrainingPlan, TrainSettings
from workflows.plumbing import build
from workflows.plumbing.schema import schema_of
from workflows.plumbing.training_network import conv_trunk

NetworkConf = schema_of(TrainSettings, "NetworkConf", keys=("hidden", "activation", "learning_rate", "batch_size",
                                                         "epochs", "patience", "log_output",
                                                         "jacobian_weight"))


WarnConf = schema_of(Thresholds, "WarnConf", keys=("warn_r2", "warn_jacobian"),
                     rename={"warn_r2": "r2", "warn_jacobian": "jacobian"})


PlanConf = schema_of(TrainingPlan, "PlanConf")


def training_settings(t: DictConfig, space, input_fields=None) -> tuple[TrainSettings, TrainingPlan, Thresholds]:
    """The network, plan and warning thresholds of a ``training`` section (this run's, or one recorded in a
    training.nc) and the ``input_fields`` of a convolutional trunk."""
    log_inputs = t.log_inputs if t.log_inputs is not None else [p.name for p in space.parameters if p.scale == "log"]
    return (build.settings(TrainSettings, t, log_inputs=tuple(log_inputs),
                           conv=conv_trunk(t, build.plain(input_fields))), build.settings(TrainingPlan, t),
            Thresholds(r2=t.warn_r2, jacobian=t.warn_jacobian))
