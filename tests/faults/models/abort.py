import os

import torch.nn as nn


# torchscan: input_shape=(4,)
def build():
    os.abort()  # the abort
