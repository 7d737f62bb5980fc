"""Auto-tuning: space -> features -> cost model -> search -> measure -> records ->
apply_history_best. AutoTVM's vocabulary:

    @autotune.template("matmul")            # knobs from autotune.get_config()
    task = autotune.create_task("matmul", args=(1024, 1024, 1024, "float32"), target="llvm")
    tuner = autotune.XGBTuner(task)
    tuner.tune(n_trial=200, measure_option=autotune.measure_option(...),
               callbacks=[autotune.progress_bar(), autotune.log_to_file("matmul.jsonl")])
    with autotune.apply_history_best("matmul.jsonl"):
        s, args = matmul(1024, 1024, 1024, "float32")

Built-in templates (tensorlang.autotune.templates) register on first lookup by name. A template
may declare its placeholders and computes through ``autotune.computes_once(declare)``: the
configs of one task then share them (declared once, not once per candidate the search scores).
"""

from . import callbacks as callback  # TVM's module name: autotvm.callback.progress_bar
from .callbacks import log_to_file, progress_bar
from .dask_measure import CpuMismatchError, DaskBuilder, DaskClusterError, DaskRunner
from .evolution import EvolutionTuner
from .features import N_FEATURES, extract_features, lower_for_features
from .measure import (
                      BUILD_ERROR,
                      ERROR_KINDS,
                      ILLEGAL,
                      RUN_ERROR,
                      TIMEOUT,
                      WRONG_ANSWER,
                      LocalBuilder,
                      LocalRunner,
                      MeasureInput,
                      MeasureOption,
                      MeasureResult,
                      measure_batch,
                      measure_option,
)
from .record import (
                      ApplyHistoryBest,
                      Record,
                      append_records,
                      apply_history_best,
                      best_records,
                      load_records,
                      pick_best,
)
from .space import ConfigEntity, ConfigSpace, FallbackConfig
from .task import (
                      ApplyConfig,
                      DispatchContext,
                      FallbackContext,
                      Task,
                      TemplateError,
                      computes_once,
                      create_task,
                      get_config,
                      get_template,
                      template,
)
from .task_scheduler import TaskScheduler
from .tune import tune_tasks
from .tuner import (
                      GATuner,
                      GridSearchTuner,
                      RandomTuner,
                      Tuner,
                      TuningError,
                      TuningWarning,
                      XGBTuner,
)
from .workload import WorkloadTask, structural_hash, workload

__all__ = [
                      "BUILD_ERROR",
                      "ERROR_KINDS",
                      "ILLEGAL",
                      "N_FEATURES",
                      "RUN_ERROR",
                      "TIMEOUT",
                      "WRONG_ANSWER",
                      "ApplyConfig",
                      "ApplyHistoryBest",
                      "ConfigEntity",
                      "ConfigSpace",
                      "CpuMismatchError",
                      "DaskBuilder",
                      "DaskClusterError",
                      "DaskRunner",
                      "DispatchContext",
                      "EvolutionTuner",
                      "FallbackConfig",
                      "FallbackContext",
                      "GATuner",
                      "GridSearchTuner",
                      "LocalBuilder",
                      "LocalRunner",
                      "MeasureInput",
                      "MeasureOption",
                      "MeasureResult",
                      "RandomTuner",
                      "Record",
                      "Task",
                      "TaskScheduler",
                      "TemplateError",
                      "Tuner",
                      "TuningError",
                      "TuningWarning",
                      "WorkloadTask",
                      "XGBTuner",
                      "append_records",
                      "apply_history_best",
                      "best_records",
                      "callback",
                      "computes_once",
                      "create_task",
                      "extract_features",
                      "get_config",
                      "get_template",
                      "load_records",
                      "log_to_file",
                      "lower_for_features",
                      "measure_batch",
                      "measure_option",
                      "pick_best",
                      "progress_bar",
                      "structural_hash",
                      "template",
                      "tune_tasks",
                      "workload",
]


def __getattr__(name: str):
    # an AutoTVM name we do not have: the error says what to use (tensorlang/tvm_names.py)
    from tensorlang.tvm_names import AUTOTVM_NAMES, missing

    raise missing("module 'tensorlang.autotune'", name, AUTOTVM_NAMES)
