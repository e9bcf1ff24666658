// common/layout.h - the job's variables, where they live, and how they
// start. pstrain's own models build the layout from the model spec and the
// data's dimensions (pti_layout_init); a program of its own declares named
// variables one by one (pti_layout_vars, pti_layout_add). Every process of
// a job builds the same layout, so they agree without telling each other;
// the hello compares its hash.
//
// All variables are laid end to end in declared order as one flat vector
// of n_params floats (the key space). Server s of S owns the contiguous
// flat range [n*s/S, n*(s+1)/S): every server holds an equal share to
// within one element, and a variable that crosses a boundary is split into
// contiguous pieces. Initial values are a pure function of (seed, variable,
// element), so any server can fill its own range without the others.
#ifndef PT_COMMON_LAYOUT_H
#define PT_COMMON_LAYOUT_H

#include <stdint.h>

#define PT_MAX_LAYERS 8 // hidden layers plus the output layer
#define PT_MAX_VARS 64
#define PT_VAR_NAME 32 // bytes of a variable name, with its NUL
#define PT_SPEC_MAX 96
#define PT_MAX_TABLES 8 // embedding tables of a job (issue 35)
#define PT_TABLE_MAX_DIM 65536 // floats of a table's row, at most

enum {
	PT_MODEL_SOFTMAX = 1,
	PT_MODEL_MLP = 2,
	PT_MODEL_VARS = 3,
	PT_MODEL_CNN = 4,
	PT_MODEL_FM = 5, // "lr" and "fm:K": a bias and one table (issue 35)
	PT_MODEL_WD = 6, // "wide-deep:K,H1,...": a bias, an MLP, one table
};

#define PT_WD_MAX_HIDDEN 3 // hidden layers of "wide-deep:K,H1,..."

#define PT_FM_MAX_K 256 // factors of "fm:K"
// Floats of a sparse model's dense variable "bias": its first is the
// bias, and the others stay 0, so that any number of servers (up to
// --servers' 256) each hold part of the dense vector and move with
// every step, as the servers of a dense model do.
#define PT_FM_DENSE 256

#define PT_CNN_MAX_CONV 4 // conv layers of a "cnn:C1,..." spec
#define PT_CNN_MAX_DENSE 3 // hidden dense layers of "cnn:C1,.../H1,..."

// An embedding table: rows of dim floats addressed by 64-bit ids, kept
// apart from the flat vector. Row id lives on server
// pti_layout_row_server(id, S), created there on first touch with initial
// values uniform in [-bound, bound] that depend only on (seed, table, id)
// (ps/rows.h), so that any number of servers holds the same rows.
typedef struct pti_emb_table {
	char name[PT_VAR_NAME];
	uint32_t dim;
	float bound;
} pti_emb_table;

typedef struct pti_var {
	char name[PT_VAR_NAME]; // "w0", "b0", "w1", ...
	uint32_t rows;  // fan-in for weights, 1 for biases (vars: 1)
	uint32_t cols;  // fan-out (vars: 1)
	uint32_t fan_in; // sets the initial scale (vars: 0)
	float bound;    // initial values are uniform in [-bound, bound]
	uint64_t given; // a hash of initial values the program gave instead
			// (pt_job_var_values), 0 when they are drawn
	uint64_t off;   // first element in the flat vector
	uint64_t n;     // rows * cols
} pti_var;

// The CNN ("cnn:C1,...,Cn", kind PT_MODEL_CNN) has n_layers = n + 1: conv
// layers 0 .. n-1, then the dense output layer n. With hidden dense
// layers ("cnn:C1,...,Cn/H1,...,Hm", n_conv = n) it has n + m + 1: the
// conv layers, then dense layers n .. n+m-1 of H1 .. Hm units with ReLU
// (width[n + 1 + j] = H_{j+1}), then the output layer n + m, each dense
// w (width[l], width[l + 1]). Conv layer l takes
// side[l] x side[l] images of chan[l] channels (chan[0] = 1, the input)
// to chan[l + 1] = C_{l+1} channels: a 3x3 convolution, stride 1, zero
// padding 1, plus bias, ReLU, then a 2x2 max-pool of stride 2, so
// side[l + 1] = side[l] / 2 (floor). width[l] is then layer l's input
// size, side[l]^2 chan[l] features (width[0] = side[0]^2, the data's
// dim), and width[n + 1] the classes. w_l of a conv layer is
// (9 chan[l], chan[l + 1]); the dense w_n is (width[n], classes).
// Images are stored row-major, channels innermost: feature (y side + x)
// chan + c; conv weight row (ky 3 + kx) chan[l] + c (ky, kx in 0..2)
// multiplies input pixel (y + ky - 1, x + kx - 1) of channel c.
typedef struct pti_layout {
	char spec[PT_SPEC_MAX]; // "softmax", "mlp:256,128", "cnn:32,64", "vars"
	int kind;
	uint32_t n_layers;               // weight layers, output included
	uint32_t n_conv;                 // CNN only: conv layers
	uint32_t fm_k;                   // FM only: factors (0: "lr"); WD:
					 // the embedding's floats
	uint32_t wd_n, wd_hidden[PT_WD_MAX_HIDDEN]; // WD: hidden layers
	uint32_t width[PT_MAX_LAYERS + 1]; // width[0] = input dim, last = classes
	uint32_t chan[PT_MAX_LAYERS + 1];  // CNN only: channels, see above
	uint32_t side[PT_MAX_LAYERS + 1];  // CNN only: image side, see above
	uint32_t n_vars;
	// w0, b0, w1, b1, ... (MLP: w_l is width[l] x width[l+1]; CNN: above)
	pti_var vars[PT_MAX_VARS];
	uint64_t n_params;
	uint32_t n_tables;
	pti_emb_table tables[PT_MAX_TABLES];
} pti_layout;

typedef struct pti_range {
	uint64_t lo, hi; // [lo, hi) in the flat vector
} pti_range;

// pti_layout_init parses spec ("softmax", "mlp:H1,H2,...",
// "cnn:C1,...[/H1,...]", 1 to PT_CNN_MAX_CONV conv layers and up to
// PT_CNN_MAX_DENSE hidden dense layers, "lr" or "fm:K") for inputs of in_dim
// features and `classes` outputs. Returns PT_EINVAL, with a detail naming
// the spec, when it does not parse or a size is 0 or too large; for a
// CNN also when in_dim is not a square (one-channel image) or the image
// is too small for its poolings (the detail names the dim).
int pti_layout_init(pti_layout *l, const char *spec, uint32_t in_dim,
    uint32_t classes);

// The sparse models, "lr" (logistic regression) and "fm:K" (a
// factorization machine of K factors, 1 to PT_FM_MAX_K), over examples of
// in_dim ids each and 2 classes (a click set): variable "bias"
// (PT_FM_DENSE floats, the first the bias, all 0 at first) and table
// "emb" of rows of 1 + K floats (the id's weight, then its factors;
// uniform in [-0.01, 0.01] at first for fm, 0 for lr). "lr" on C > 2
// classes is softmax regression: rows of C floats, the first C of "bias"
// the classes' biases. "wide-deep:K,H1,..." (kind PT_MODEL_WD, up to
// PT_WD_MAX_HIDDEN hidden layers) is model/sparse.h's wide & deep model:
// "bias", then w0, b0, ... of its MLP from in_dim K inputs, and table
// "emb" of rows of O + K floats (O: 1 on 2 classes, else the classes).
// pti_layout_sparse says whether spec names one.
int pti_layout_sparse(const char *spec);

// pti_layout_vars starts an empty layout of named variables (spec "vars")
// for pti_layout_add.
void pti_layout_vars(pti_layout *l);

// pti_layout_add appends variable `name` of n floats, its initial values
// uniform in [-bound, bound] (0: zeros). PT_EINVAL naming the variable
// when the name is empty, too long or taken, n is 0 or the total passes
// 2^40 floats, bound is negative or not finite; PT_ERANGE beyond
// PT_MAX_VARS variables.
int pti_layout_add(pti_layout *l, const char *name, uint64_t n, double bound);

// pti_layout_table appends embedding table `name` of rows of dim floats,
// initial values uniform in [-bound, bound], to a layout of any kind.
// Its index is the table's number on the wire. PT_EINVAL naming the
// table when the name is empty, too long or taken (by a variable or a
// table), dim is 0 or over PT_TABLE_MAX_DIM, bound is negative or not
// finite; PT_ERANGE beyond PT_MAX_TABLES tables.
int pti_layout_table(pti_layout *l, const char *name, uint32_t dim,
    double bound);

// pti_layout_row_server is the server (of n) that holds row id of every
// table: a hash of the id, the same in every process.
uint32_t pti_layout_row_server(uint64_t id, uint32_t n);

// pti_layout_find returns the index of variable name, or -1.
int pti_layout_find(const pti_layout *l, const char *name);

// pti_layout_hash is a 64-bit digest of the spec, every variable's shape
// and every table's name, dim and initial bound;
// processes compare it to check that they run the same model.
uint64_t pti_layout_hash(const pti_layout *l);

// pti_layout_shard returns server s's flat range out of n_servers (s <
// n_servers, n_servers > 0).
pti_range pti_layout_shard(const pti_layout *l, uint32_t s, uint32_t n_servers);

// pti_layout_init_values writes the initial values of flat elements
// [lo, hi) to out (hi - lo floats): each variable's uniform in
// [-bound, bound] (a layer of fan-in f: 1/sqrt(f)), a pure function of
// (seed, variable index, element).
void pti_layout_init_values(float *out, const pti_layout *l, uint64_t seed,
    uint64_t lo, uint64_t hi);

#endif // PT_COMMON_LAYOUT_H
