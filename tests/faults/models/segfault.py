import ctypes

import torch.nn as nn


# torchscan: input_shape=(4,)
def build():
    ctypes.string_at(0)  # the crash
    return nn.Linear(4, 2)
