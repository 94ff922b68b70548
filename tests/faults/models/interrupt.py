import torch.nn as nn


# torchscan: input_shape=(4,)
def build():
    raise KeyboardInterrupt  # the interrupt
