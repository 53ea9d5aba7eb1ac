from course.budget import get_budget
from course.resources import cluster_gpus, plan_resources

CPU, GPU = get_budget(kind="cpu"), get_budget(kind="gpu")


def test_no_gpu_is_requested_on_a_cpu_cluster_whatever_the_budget():
    for budget in (CPU, GPU):
        plan = plan_resources({"CPU": 8.0}, budget)
        assert not plan.use_gpu and plan.gpus_per_actor == 0
        assert plan.num_workers == min(budget.max_workers, 4)  # a CPU for Ray Data next to each worker
        assert plan.num_workers + plan.num_actors <= 8


def test_small_cpu_cluster_still_fits_one_worker_and_one_actor():
    plan = plan_resources({"CPU": 2.0}, CPU)
    assert (plan.num_workers, plan.num_actors, plan.use_gpu) == (1, 1, False)


def test_gpus_are_used_one_per_worker_and_actor_up_to_the_budget():
    plan = plan_resources({"CPU": 32.0, "GPU": 4.0}, GPU)
    assert plan.use_gpu and plan.num_workers == 4 and plan.num_actors == 4 and plan.gpus_per_actor == 1
    assert plan_resources({"CPU": 16.0, "GPU": 1.0}, GPU).num_workers == 1
    assert plan_resources({"CPU": 32.0, "GPU": 4.0}, CPU).num_workers == CPU.max_workers


def test_cluster_gpus_counts_whole_gpus():
    assert cluster_gpus({"CPU": 8.0}) == 0 and cluster_gpus({"GPU": 2.0}) == 2
