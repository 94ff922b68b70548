import os

import torch.nn as nn

os.write(1, b'Content-Length: 99\r\n\r\n{"jsonrpc": "2.0"}' * 1000)  # looks like the protocol
os.write(2, b"on fd 2\n")


# torchscan: input_shape=(4,)
def build():
    return nn.Linear(4, 5)
