"""One real node (containerd, kubelet, CNI) beside kwok nodes, in a network namespace of its own.

``netns`` makes and checks that namespace, ``__main__`` runs a command inside a fresh one,
``containerd``, ``kubelet`` and ``cni`` write each daemon's configuration, ``cluster`` starts
the control plane and the node together and tears everything down. It builds on
``localcluster.cluster`` only.
"""
