// Every key of the training config and its default. MODEL.* and INPUT.* defaults equal
// model::ModelConfig's (torchvision's maskrcnn_resnet50_fpn); SOLVER.* follows
// Detectron2's 1x schedule for 16 images per batch.
#include "trainer/engine/config/config.h"

#include <limits>

namespace mrcnn::engine {

namespace {

using Values = std::map<std::string, ConfigValue>;
using S = std::string;

// --- model (read by model::ModelConfig::FromYaml): the body, the FPN and the RPN ---
void AddBackboneAndRpnDefaults(Values& v) {
  v["MODEL.DEVICE"] = S("auto");  // auto | cpu | cuda
  v["MODEL.WEIGHTS"] = S("");     // safetensors file: whole model or backbone; "" = from scratch
  v["MODEL.MASK_ON"] = true;
  v["MODEL.CHANNELS_LAST"] = true;  // CUDA: NHWC maps end to end (trainer/model/config.h)
  v["MODEL.PIXEL_MEAN"] = FloatList{123.675, 116.28, 103.53};
  v["MODEL.PIXEL_STD"] = FloatList{58.395, 57.12, 57.375};
  v["MODEL.BACKBONE.NAME"] = S("resnet50");
  v["MODEL.BACKBONE.NORM"] = S("FrozenBN");
  v["MODEL.BACKBONE.FROZEN_BN_EPS"] = 1e-5;
  v["MODEL.BACKBONE.TRAINABLE_LAYERS"] = int64_t{3};
  v["MODEL.NECK.NAME"] = S("fpn");
  // Detectron2's keys (read when MODEL.BACKBONE.NAME is build_resnet_fpn_backbone or
  // build_resnet_backbone, trainer/model/config.h); the defaults are Detectron2's.
  v["MODEL.RESNETS.DEPTH"] = int64_t{50};
  v["MODEL.RESNETS.NUM_GROUPS"] = int64_t{1};
  v["MODEL.RESNETS.WIDTH_PER_GROUP"] = int64_t{64};
  v["MODEL.RESNETS.STRIDE_IN_1X1"] = true;
  v["MODEL.RESNETS.RES5_DILATION"] = int64_t{1};
  v["MODEL.RESNETS.STEM_OUT_CHANNELS"] = int64_t{64};
  v["MODEL.RESNETS.RES2_OUT_CHANNELS"] = int64_t{256};
  v["MODEL.RESNETS.OUT_FEATURES"] = StringList{"res2", "res3", "res4", "res5"};
  v["MODEL.RESNETS.NORM"] = S("FrozenBN");
  // Deformable 3x3s per stage res2..res5 (DCN v1; MODULATED: v2), offsets in NUM_GROUPS groups.
  v["MODEL.RESNETS.DEFORM_ON_PER_STAGE"] = BoolList{false, false, false, false};
  v["MODEL.RESNETS.DEFORM_MODULATED"] = false;
  v["MODEL.RESNETS.DEFORM_NUM_GROUPS"] = int64_t{1};
  v["MODEL.ROI_HEADS.NAME"] = S("StandardROIHeads");  // or Res5ROIHeads (C4), CascadeROIHeads
  v["MODEL.ANCHOR_GENERATOR.OFFSET"] = 0.0;
  v["MODEL.PROPOSAL_GENERATOR.MIN_SIZE"] = 0.0;
  v["MODEL.ROI_BOX_HEAD.POOLER_TYPE"] = S("ROIAlignV2");
  v["MODEL.ROI_BOX_HEAD.NUM_FC"] = int64_t{2};
  v["MODEL.ROI_BOX_HEAD.NUM_CONV"] = int64_t{0};
  v["MODEL.ROI_BOX_HEAD.CONV_DIM"] = int64_t{256};
  v["MODEL.ROI_BOX_HEAD.NORM"] = S("");  // "" | FrozenBN | GN
  v["MODEL.ROI_MASK_HEAD.POOLER_TYPE"] = S("ROIAlignV2");
  v["MODEL.ROI_MASK_HEAD.NUM_CONV"] = int64_t{4};
  v["INPUT.FORMAT"] = S("BGR");
  v["MODEL.FPN.OUT_CHANNELS"] = int64_t{256};
  v["MODEL.FPN.NORM"] = S("");  // "" | FrozenBN | GN
  v["MODEL.ANCHOR_GENERATOR.SIZES"] = FloatListList{{32}, {64}, {128}, {256}, {512}};
  v["MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS"] = FloatListList{{0.5, 1.0, 2.0}};
  v["MODEL.RPN.HEAD_NAME"] = S("standard");
  v["MODEL.RPN.PRE_NMS_TOPK_TRAIN"] = int64_t{2000};
  v["MODEL.RPN.PRE_NMS_TOPK_TEST"] = int64_t{1000};
  v["MODEL.RPN.POST_NMS_TOPK_TRAIN"] = int64_t{2000};
  v["MODEL.RPN.POST_NMS_TOPK_TEST"] = int64_t{1000};
  v["MODEL.RPN.NMS_THRESH"] = 0.7;
  v["MODEL.RPN.IOU_THRESHOLDS"] = FloatList{0.3, 0.7};
  v["MODEL.RPN.BATCH_SIZE_PER_IMAGE"] = int64_t{256};
  v["MODEL.RPN.POSITIVE_FRACTION"] = 0.5;
  v["MODEL.RPN.SCORE_THRESH"] = 0.0;
  v["MODEL.RPN.MIN_SIZE"] = 1e-3;
  v["MODEL.RPN.BBOX_REG_LOSS_TYPE"] = S("smooth_l1");  // smooth_l1 | giou
  v["MODEL.RPN.BBOX_REG_LOSS_WEIGHT"] = 1.0;
  // null: the convention's beta (torchvision 1/9, Detectron2 0); below 1e-5 is L1.
  v["MODEL.RPN.SMOOTH_L1_BETA"] = std::numeric_limits<double>::quiet_NaN();
  v["MODEL.RPN.LOSS_WEIGHT"] = 1.0;
}

// --- model: the ROI heads, RetinaNet ---
void AddHeadDefaults(Values& v) {
  v["MODEL.ROI_HEADS.NUM_CLASSES"] = int64_t{90};  // torchvision COCO weights: 90 ids (with gaps)
  v["MODEL.ROI_HEADS.SCORE_THRESH_TEST"] = 0.05;
  v["MODEL.ROI_HEADS.NMS_THRESH_TEST"] = 0.5;
  v["MODEL.ROI_HEADS.IOU_THRESHOLDS"] = FloatList{0.5};
  v["MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE"] = int64_t{512};
  v["MODEL.ROI_HEADS.POSITIVE_FRACTION"] = 0.25;
  v["MODEL.ROI_BOX_HEAD.NAME"] = S("two_mlp");
  v["MODEL.ROI_BOX_HEAD.FC_DIM"] = int64_t{1024};
  v["MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION"] = int64_t{7};
  v["MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO"] = int64_t{2};
  v["MODEL.ROI_BOX_HEAD.BBOX_REG_WEIGHTS"] = FloatList{10.0, 10.0, 5.0, 5.0};
  v["MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE"] = S("smooth_l1");  // smooth_l1 | giou
  v["MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_WEIGHT"] = 1.0;
  v["MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA"] = std::numeric_limits<double>::quiet_NaN();
  v["MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG"] = false;  // true: one box for all classes
  // CascadeROIHeads (MODEL.ROI_HEADS.NAME): each stage's matcher IoU and box-coder weights.
  v["MODEL.ROI_BOX_CASCADE_HEAD.IOUS"] = FloatList{0.5, 0.6, 0.7};
  v["MODEL.ROI_BOX_CASCADE_HEAD.BBOX_REG_WEIGHTS"] =
      FloatListList{{10.0, 10.0, 5.0, 5.0}, {20.0, 20.0, 10.0, 10.0}, {30.0, 30.0, 15.0, 15.0}};
  // Keypoint R-CNN (Detectron2's defaults; trainer/model/config.h).
  v["MODEL.KEYPOINT_ON"] = false;
  v["MODEL.ROI_KEYPOINT_HEAD.NAME"] = S("KRCNNConvDeconvUpsampleHead");
  v["MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS"] = int64_t{17};
  v["MODEL.ROI_KEYPOINT_HEAD.CONV_DIMS"] = IntList{512, 512, 512, 512, 512, 512, 512, 512};
  v["MODEL.ROI_KEYPOINT_HEAD.POOLER_RESOLUTION"] = int64_t{14};
  v["MODEL.ROI_KEYPOINT_HEAD.POOLER_SAMPLING_RATIO"] = int64_t{0};
  v["MODEL.ROI_KEYPOINT_HEAD.POOLER_TYPE"] = S("ROIAlignV2");
  v["MODEL.ROI_KEYPOINT_HEAD.MIN_KEYPOINTS_PER_IMAGE"] = int64_t{1};
  v["MODEL.ROI_KEYPOINT_HEAD.NORMALIZE_LOSS_BY_VISIBLE_KEYPOINTS"] = true;
  v["MODEL.ROI_KEYPOINT_HEAD.LOSS_WEIGHT"] = 1.0;
  // RetinaNet (MODEL.META_ARCHITECTURE RetinaNet with MODEL.BACKBONE.NAME
  // build_retinanet_resnet_fpn_backbone; Detectron2's defaults, trainer/model/config.h).
  v["MODEL.META_ARCHITECTURE"] = S("GeneralizedRCNN");  // or RetinaNet
  v["MODEL.FPN.IN_FEATURES"] = StringList{"res2", "res3", "res4", "res5"};  // RetinaNet: res3-res5
  v["MODEL.RETINANET.NUM_CLASSES"] = int64_t{80};
  v["MODEL.RETINANET.IN_FEATURES"] = StringList{"p3", "p4", "p5", "p6", "p7"};
  v["MODEL.RETINANET.NUM_CONVS"] = int64_t{4};
  v["MODEL.RETINANET.IOU_THRESHOLDS"] = FloatList{0.4, 0.5};
  v["MODEL.RETINANET.IOU_LABELS"] = IntList{0, -1, 1};
  v["MODEL.RETINANET.PRIOR_PROB"] = 0.01;
  v["MODEL.RETINANET.SCORE_THRESH_TEST"] = 0.05;
  v["MODEL.RETINANET.TOPK_CANDIDATES_TEST"] = int64_t{1000};
  v["MODEL.RETINANET.NMS_THRESH_TEST"] = 0.5;
  v["MODEL.RETINANET.BBOX_REG_WEIGHTS"] = FloatList{1.0, 1.0, 1.0, 1.0};
  v["MODEL.RETINANET.FOCAL_LOSS_GAMMA"] = 2.0;
  v["MODEL.RETINANET.FOCAL_LOSS_ALPHA"] = 0.25;
  v["MODEL.RETINANET.SMOOTH_L1_LOSS_BETA"] = 0.1;
  v["MODEL.RETINANET.BBOX_REG_LOSS_TYPE"] = S("smooth_l1");
  v["MODEL.RETINANET.NORM"] = S("");
  v["MODEL.ROI_MASK_HEAD.NAME"] = S("four_conv");
  v["MODEL.ROI_MASK_HEAD.CONV_DIM"] = int64_t{256};
  v["MODEL.ROI_MASK_HEAD.POOLER_RESOLUTION"] = int64_t{14};
  v["MODEL.ROI_MASK_HEAD.POOLER_SAMPLING_RATIO"] = int64_t{2};
  v["MODEL.ROI_MASK_HEAD.NORM"] = S("");  // "" | FrozenBN | GN (Detectron2's get_norm names)
  v["MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK"] = false;
}

void AddInputDefaults(Values& v) {
  v["INPUT.MIN_SIZE_TRAIN"] = IntList{800};  // one drawn per image
  v["INPUT.MIN_SIZE_TRAIN_SAMPLING"] = S("choice");  // choice | range (ModelConfig checks)
  v["INPUT.MAX_SIZE_TRAIN"] = int64_t{1333};
  v["INPUT.MIN_SIZE_TEST"] = int64_t{800};
  v["INPUT.MAX_SIZE_TEST"] = int64_t{1333};
  v["INPUT.SIZE_DIVISIBILITY"] = int64_t{32};
  v["INPUT.RANDOM_FLIP"] = S("horizontal");  // none | horizontal
  // Training crop before the resize (Detectron2's keys and defaults; input_crop.h checks
  // them): TYPE relative | relative_range | absolute | absolute_range, SIZE (h, w).
  v["INPUT.CROP.ENABLED"] = false;
  v["INPUT.CROP.TYPE"] = S("relative_range");
  v["INPUT.CROP.SIZE"] = FloatList{0.9, 0.9};
  // Ours, not Detectron2's: an instance cut by the crop is kept when at least this
  // fraction of its area (mask, else box) is inside the window.
  v["INPUT.CROP.MIN_AREA_FRACTION"] = 0.3;
}

void AddDataAndSolverDefaults(Values& v) {
  // --- datasets: COCO files inside SageMaker channels ---
  v["DATASETS.TRAIN"] = StringList{"train"};  // channel names
  v["DATASETS.TEST"] = StringList{"val", "test"};  // the first channel present is evaluated
  // Relative to the channel dir; "{channel}" is replaced by the channel's name; "" finds
  // the layout by itself (see channel_layout.h: annotations.json + images/, or the
  // `trainer make-shapes` / COCO layout annotations/instances_<channel>.json + <channel>/).
  v["DATASETS.ANNOTATION_FILE"] = S("");
  v["DATASETS.IMAGE_DIR"] = S("");

  v["DATALOADER.NUM_WORKERS"] = int64_t{4};
  v["DATALOADER.ASPECT_RATIO_GROUPING"] = true;
  v["DATALOADER.FILTER_EMPTY_ANNOTATIONS"] = true;

  // --- solver ---
  v["SOLVER.IMS_PER_BATCH"] = int64_t{16};  // total over all processes
  v["SOLVER.BASE_LR"] = 0.02;
  v["SOLVER.MOMENTUM"] = 0.9;
  v["SOLVER.NESTEROV"] = false;
  v["SOLVER.WEIGHT_DECAY"] = 1e-4;
  v["SOLVER.WEIGHT_DECAY_NORM"] = 0.0;  // for normalisation layers' weights and biases
  // null (Detectron2's None): biases get SOLVER.WEIGHT_DECAY (norm biases WEIGHT_DECAY_NORM);
  // a value applies to every bias, a norm layer's too, as Detectron2's override does.
  v["SOLVER.WEIGHT_DECAY_BIAS"] = std::numeric_limits<double>::quiet_NaN();
  v["SOLVER.BIAS_LR_FACTOR"] = 1.0;
  v["SOLVER.OPTIMIZER"] = S("SGD");  // SGD | NovoGrad (solver/optimizer_registry.cpp)
  v["SOLVER.BETAS"] = FloatList{0.95, 0.98};  // NovoGrad's beta1, beta2
  v["SOLVER.NOVOGRAD.EPS"] = 1e-8;
  v["SOLVER.NOVOGRAD.GRAD_AVERAGING"] = false;
  v["SOLVER.LR_SCHEDULER_NAME"] = S("WarmupMultiStepLR");  // or WarmupCosineLR
  v["SOLVER.MAX_ITER"] = int64_t{90000};
  v["SOLVER.STEPS"] = IntList{60000, 80000};
  v["SOLVER.GAMMA"] = 0.1;
  v["SOLVER.NUM_DECAYS"] = int64_t{3};  // WarmupStepWithFixedGammaLR
  v["SOLVER.RESCALE_INTERVAL"] = false;
  // 0: IMS_PER_BATCH, BASE_LR and the schedule's iterations are for this job's world size.
  // N: they were written for N processes, and a job of W processes scales them as Detectron2's
  // DefaultTrainer.auto_scale_workers does (batch and LR x W/N, iterations x N/W).
  v["SOLVER.REFERENCE_WORLD_SIZE"] = int64_t{0};
  v["SOLVER.BASE_LR_END"] = 0.0;  // cosine end value
  v["SOLVER.WARMUP_FACTOR"] = 1.0 / 1000;
  v["SOLVER.WARMUP_ITERS"] = int64_t{1000};
  v["SOLVER.WARMUP_METHOD"] = S("linear");  // linear | constant
  v["SOLVER.CHECKPOINT_PERIOD"] = int64_t{5000};
  v["SOLVER.CHECKPOINTS_TO_KEEP"] = int64_t{3};
  v["SOLVER.ACCUMULATION_STEPS"] = int64_t{1};
  v["SOLVER.LOG_PERIOD"] = int64_t{20};
  v["SOLVER.CLIP_GRADIENTS.ENABLED"] = false;
  // value | norm, applied to each parameter's gradient on its own (Detectron2's
  // per-parameter clipper); full_model: the norm of all gradients together.
  v["SOLVER.CLIP_GRADIENTS.CLIP_TYPE"] = S("value");
  v["SOLVER.CLIP_GRADIENTS.CLIP_VALUE"] = 1.0;
  v["SOLVER.CLIP_GRADIENTS.NORM_TYPE"] = 2.0;
  v["SOLVER.AMP.ENABLED"] = false;  // on a CPU: bfloat16 autocast; float16 stays fp32 there
  v["SOLVER.AMP.DTYPE"] = S("float16");  // float16 (dynamic loss scaling) | bfloat16
  // Backbone + FPN + RPN head captured in CUDA graphs, one per padded (height, width):
  // batches are padded to the smallest shape that holds them (and to the full micro-batch);
  // a batch no shape holds runs eagerly. CUDA only (refused on a CPU).
  v["SOLVER.CUDA_GRAPHS.ENABLED"] = false;
  v["SOLVER.CUDA_GRAPHS.SHAPES"] = FloatListList{{800, 1344}, {1344, 800}};

  // --- data-parallel training (WORLD_SIZE > 1; see engine/distributed/) ---
  v["DIST.BUCKET_SIZE_MB"] = 25.0;  // gradients are averaged in flat float32 buckets of this size
  v["DIST.OVERLAP_BACKWARD"] = false;  // all-reduce buckets from gradient hooks during backward
  v["DIST.TIMEOUT_SECONDS"] = 300.0;   // rendezvous, and the longest wait for a peer's data
  v["DIST.BARRIER_TIMEOUT_SECONDS"] = 7200.0;  // waits for rank 0's evaluation / checkpoints

  // --- TensorBoard event files (events/tensorboard/) ---
  v["TENSORBOARD.ENABLED"] = true;
  v["TENSORBOARD.DIR"] = S("");  // "" = tensorboardoutputconfig.json LocalPath, else <base>/output/tensorboard
  v["TENSORBOARD.HISTOGRAM_PERIOD"] = int64_t{0};  // weight/gradient norms and histograms; 0 = off
  v["TENSORBOARD.EVAL_IMAGES"] = int64_t{4};  // val images drawn with predictions at each evaluation

  v["TEST.EVAL_PERIOD"] = int64_t{0};  // 0 = only at the end
  v["TEST.DETECTIONS_PER_IMAGE"] = int64_t{100};
  // Keypoint evaluation's OKS sigmas, one per keypoint; empty: COCO's 17 person sigmas.
  v["TEST.KEYPOINT_OKS_SIGMAS"] = FloatList{};
  // Evaluation by tiles of large validation images (trainer/model/README.md, "Tiled
  // inference"): tile side in pixels (0: whole images) and the fraction neighbours share.
  v["TEST.TILE.SIZE"] = int64_t{0};
  v["TEST.TILE.OVERLAP"] = 0.2;
  // A tiled image keeps TEST.DETECTIONS_PER_IMAGE per tile, and that times its tiles after
  // the merge, at most this many.
  v["TEST.TILE.MAX_DETECTIONS_CAP"] = int64_t{1000};
  // Evaluation's precision, as the server's MRCNN_SERVING_PRECISION: fp32 (the default, so AP
  // does not depend on the machine), bf16 (CPU: the dense layers in bf16; CUDA: autocast),
  // fp16 (CUDA), or auto (bf16 on a CPU with native bf16 dot products, else fp32).
  v["TEST.PRECISION"] = S("fp32");

  v["OUTPUT_DIR"] = S("");  // "" = SM_OUTPUT_DATA_DIR (or ./output outside SageMaker)
  v["SEED"] = int64_t{-1};  // < 0: drawn from the clock (and logged)
  v["VERSION"] = int64_t{2};
}

}  // namespace

TrainConfig TrainConfig::Defaults() {
  TrainConfig c;
  AddBackboneAndRpnDefaults(c.values_);
  AddHeadDefaults(c.values_);
  AddInputDefaults(c.values_);
  AddDataAndSolverDefaults(c.values_);
  return c;
}

}  // namespace mrcnn::engine
