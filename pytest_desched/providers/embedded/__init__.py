"""The embedded provider: a real control plane by kwokctl, kwok nodes, a stand-in kubelet.

`cluster` brings the cluster up and down (and reaps killed runs' clusters by the records in
`owners`); `kubelet` runs round pods with the real descheduler binary, since kwok nodes run
no containers. Import them from their modules: this package imports none of them, so that
`python -m pytest_desched.providers.embedded.kubelet` (the stand-in kubelet's own process,
and likewise `prometheus_front`) does not import its module before running it as __main__
(cluster imports kubelet: runpy's RuntimeWarning, and two copies of the module).
"""
