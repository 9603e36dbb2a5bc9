"""--fill road: ROAD's noisy linear imputation (Rong et al. 2022) as a ROAR/KAR fill. The removed pixels of
uint8 images are imputed from their kept neighbours in [0, 1] pixel space (ops.impute: each the weighted
mean of its 8 neighbours, solved jointly, plus N(0, ROAD_NOISE^2) noise keyed by the image's index in its
split), then normalized for the model. A loader holding its split in memory imputes it once per cell; a
streamed one per batch, the same images since the noise follows the sample.
"""

from roarfast.fills import ROAD_FILL, Fill, register_fill, removed_pixels

#: std of the imputation noise in [0, 1] pixel units (the ROAD paper's default)
ROAD_NOISE = 0.01
#: the noise's Philox key: one for every run, so every cell and evaluation sees the same imputed images
ROAD_SEED = 0
#: images imputed per call when a whole split is filled at once: bounds the solver's working memory
ROAD_CHUNK = 1024


class Road(Fill):
    name = ROAD_FILL
    description = "ROAD's noisy linear imputation from the kept neighbours (pixel ranks)"
    pixel_ranks = "imputes whole pixels"
    whole_split_chunk = ROAD_CHUNK
    cites = ("rong2022consistent",)

    def apply(self, images, ranks, fraction: float, keep: bool, *, mean, std, ids, out_dtype=None,
              channels_last: bool = False):
        # late: loads torch, and the fill listing imports this module
        import torch

        from roarfast import ops

        self.check_ranks(ranks.shape)
        mean = ops.per_channel(mean, images, "mean").view(1, -1, 1, 1)
        std = ops.per_channel(std, images, "std").view(1, -1, 1, 1)
        # imputed in pixel units centred on the dataset mean: the solve commutes with the shift, and an image
        # with nothing kept (no known neighbour anywhere) then takes impute's 0 = the dataset's channel mean
        x = images.float() / 255.0 - mean
        x = ops.impute(x, removed_pixels(ranks, fraction, keep), noise=ROAD_NOISE, seed=ROAD_SEED,
                       ids=ids.to(torch.int64))
        x = x / std
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        return x.to(out_dtype or torch.float32).contiguous(memory_format=memory_format)


ROAD = register_fill(Road(), order=1)
