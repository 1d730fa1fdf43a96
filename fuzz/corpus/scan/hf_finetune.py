from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("gpt2")
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=8,
    torch_compile=True,
    torch_compile_mode="max-autotune",
    gradient_checkpointing=True,
    dataloader_num_workers=4,
)
trainer = Trainer(model=model, args=args)
