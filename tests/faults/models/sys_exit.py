import sys

import torch.nn as nn


# torchscan: input_shape=(4,)
def build():
    sys.exit()  # the exit
