"""Run by test_parallel_ray_cluster.py in a process of its own: a two-node Ray cluster on
127.0.0.1 (ray.cluster_utils.Cluster, whose nodes are this process's children), a pipeline
whose actors spread over both nodes, and the worker node removed mid-epoch. Prints one JSON
line: the sample indices delivered and where the actors ran before and after."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ray_cluster import RAY_ENV

os.environ.update(RAY_ENV)

import ray
from ray.cluster_utils import Cluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parallel_sources import PerSampleSource, SampleSpec, pipeline

from dali_lite import fn


def node_of_actors(pipe) -> list[str]:
    return pipe._resources.parallel.pool.node_ids()


def main() -> None:
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 3, "node_ip_address": "127.0.0.1",
                                      "include_dashboard": False})
    worker_node = cluster.add_node(num_cpus=2, node_ip_address="127.0.0.1")
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
    cluster.wait_for_nodes()
    print("cluster up", file=sys.stderr, flush=True)
    source = PerSampleSource((SampleSpec("int32", (2,)),), length=40, with_meta=True,
                             as_tuple=True, delay_s=0.05)
    # Spread: one CPU per actor, 3 actors on 5 CPUs; the "spread" strategy puts actors on
    # both nodes, so removing the worker node loses at least one of them.
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               num_outputs=2),
                    4, py_num_workers=3, py_start_method="ray",
                    py_ray_options={"num_cpus": 1, "scheduling_strategy": "SPREAD"})
    pipe.build()
    print("built", file=sys.stderr, flush=True)
    seen = [int(i) for i in pipe.run()[1].as_array()[:, 0]]
    before = node_of_actors(pipe)
    print("before", before, file=sys.stderr, flush=True)
    cluster.remove_node(worker_node, allow_graceful=False)
    while True:
        try:
            seen += [int(i) for i in pipe.run()[1].as_array()[:, 0]]
        except StopIteration:
            break
    after = node_of_actors(pipe)
    pipe.close()
    print(json.dumps({"seen": seen, "before": before, "after": after,
                      "worker_node": worker_node.node_id}), flush=True)
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main()
