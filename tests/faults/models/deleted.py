import os
import time

import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


# torchscan: input_shape=(4,)
def build():
    open(os.path.join(HERE, "deleted.started"), "w").close()
    while os.path.exists(__file__):  # the test deletes this file and its helper now
        time.sleep(0.02)
    import deleted_helper  # the import of the deleted helper
    return nn.Linear(4, deleted_helper.WIDTH)
