"""The embedded cluster: etcd, kube-apiserver and the rest on loopback, and what drives them.

``control_plane`` starts the binaries, ``pki`` makes their certificates, ``kube`` is the
small API client, ``process`` runs and stops children, ``stack`` deploys the Compactor onto
a cluster, ``prometheus``, ``scrape`` and ``procstat`` read what processes report of
themselves. It imports none of the harness's other packages (demo, chaos, bench): they are
built on it.
"""
