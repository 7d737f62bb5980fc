"""A template defined in a script (so in __main__, which workers never import) reaches every
kind of worker by value: the feature workers featurize its configs, the measuring process
checks kernels against its numpy reference.

Usage: python by_value_workers.py"""

import numpy as np
from tensorlang.autotune.features import FeaturePool, config_features

import tensorlang as tl
from tensorlang import autotune

SCALE = 3.0  # a global the template reads: it travels with it


@autotune.template("tvm_style/scale", reference=lambda a: a * SCALE)
def scale(n):
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: A[i] * SCALE, name="B")
    s = tl.create_schedule(B)
    cfg = autotune.get_config()
    cfg.define_split("split", B.op.axis[0], num_outputs=2)
    cfg["split"].apply(s, B, B.op.axis[0])
    return s, [A, B]


task = autotune.create_task("tvm_style/scale", (64,))
assert task.template.worker_spec() != "__main__"  # pickled, not a module name

pool = FeaturePool(task, workers=2)
indices = list(range(len(task.config_space)))
features = pool.map(indices)
assert pool._pool is not None, "the feature workers failed (map fell back to this process)"
pool.close()
for i, f in zip(indices, features):
    np.testing.assert_allclose(f, config_features(task, task.config(i)))

option = autotune.measure_option(autotune.LocalBuilder(n_parallel=2),
                                 autotune.LocalRunner(number=1, repeat=1))
try:
    inputs = [autotune.MeasureInput(task, task.config(i)) for i in indices]
    results = autotune.measure_batch(option, inputs)
finally:
    option.close()
assert all(r.valid for r in results), [(r.error, r.error_msg[:200]) for r in results]
print(f"featurized {len(features)} configs in the workers; measured {len(results)} against "
      "the reference")
