from helpers.cluster import plan_resources


def test_no_gpu_is_requested_on_a_cpu_cluster():
    plan = plan_resources({"CPU": 8.0})
    assert not plan.use_gpu and plan.gpus_per_actor == 0
    assert plan.num_workers == 2 and plan.num_actors == 2


def test_small_cpu_cluster_still_fits_one_worker_and_one_actor():
    plan = plan_resources({"CPU": 2.0})
    assert (plan.num_workers, plan.num_actors, plan.use_gpu) == (1, 1, False)


def test_gpus_are_used_one_per_worker_and_actor_when_present():
    plan = plan_resources({"CPU": 32.0, "GPU": 4.0})
    assert plan.use_gpu and plan.num_workers == 2 and plan.gpus_per_actor == 1
    assert plan_resources({"CPU": 16.0, "GPU": 1.0}).num_workers == 1
