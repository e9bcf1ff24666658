// common/optspec.h - the servers' optimizer as --optimizer names it, read
// once (by the flag table, into pti_config.optim) into typed fields. The
// update itself is common/optim.c's.
#ifndef PT_COMMON_OPTSPEC_H
#define PT_COMMON_OPTSPEC_H

enum {
	PT_OPT_SGD = 1,
	PT_OPT_MOMENTUM,
	PT_OPT_NESTEROV,
	PT_OPT_ADAGRAD,
	PT_OPT_ADAM,
	PT_OPT_FTRL,
};

typedef struct pti_optim {
	int kind;
	double momentum;     // momentum, nesterov
	double b1, b2, eps;  // adam; eps also adagrad
	double beta, l1, l2; // ftrl
	double weight_decay; // L2: the gradient gains weight_decay * p
	int n_state;         // state vectors this optimizer keeps (0-2)
} pti_optim;

// pti_optim_parse reads "sgd", "momentum:M", "nesterov:M", "adagrad",
// "adam[:B1,B2,EPS]" (defaults 0.9, 0.999, 1e-8) or "ftrl[:BETA,L1,L2]"
// (defaults 1, 0, 0) into *o (weight_decay
// 0: --weight-decay is a flag of its own). Returns 0, or PT_EINVAL with
// a detail naming --optimizer and what is accepted.
int pti_optim_parse(pti_optim *o, const char *spec);

// pti_optim_default_lr is the learning rate --lr 0 stands for: 0.1 for
// sgd, momentum, nesterov and ftrl, 0.01 for adagrad, 0.001 for adam.
double pti_optim_default_lr(const pti_optim *o);

#endif // PT_COMMON_OPTSPEC_H
