"""Data flow: what each tensor of one forward carries, followed by tensor identity.

An observer of the recording pass (:mod:`.tracker`) propagates per-tensor states (:mod:`.flow`)
into the cumulative receptive field (:mod:`.receptive`) and token dependencies (:mod:`.tokens`).
It imports the recording room, never the other way round.
"""
