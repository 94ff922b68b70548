import torch.nn as nn


class Spin(nn.Module):
    def forward(self, x):
        while True: pass  # the hang
        return x


# torchscan: input_shape=(4,)
def build():
    return Spin()
