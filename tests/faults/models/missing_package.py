import torch.nn as nn
import torchscan_no_such_package  # the import


# torchscan: input_shape=(4,)
def build():
    return nn.Linear(4, 2)
